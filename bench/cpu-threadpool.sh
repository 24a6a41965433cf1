#!/usr/bin/env bash
# One model on ExecuTorch's CPU threadpool against the same model off it (its config.yml's
# cpu-threadpool: false, docs/models.md#cpu-threads): two services of the same jar side by side,
# `pool` serving BENCH_MODEL from models/ as it is and `alone` from a copy whose config.yml adds
# cpu-threadpool: false; the project's load generator against each in turn, every round, with the
# service's whole-process CPU per request (/proc). Writes target/bench/cpu-threadpool.{jsonl,md}.
#
# Knobs (environment): BENCH_MODEL (demo-xnnpack), BENCH_FORMATS (json; binary, grpc),
# BENCH_CONCURRENCY ("1 4"), BENCH_ROUNDS (3), BENCH_DURATION (5 s), BENCH_JIT_WARMUP (15 s per
# service, format and concurrency, not recorded), BENCH_PORT (18080; the other service +10),
# BENCH_SERVER_CPUS (taskset -c list for both services; run this script under taskset -c for the
# client's), BENCH_SERVICE_ARGS (more arguments for both), BENCH_JAR and BENCH_CP (a built jar and
# test classpath: the GPU suite's bundle on a host without Maven).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${BENCH_OUT:-$ROOT/target/bench}
PORT=${BENCH_PORT:-18080}
MGMT_PORT=$((PORT + 1))
MODEL=${BENCH_MODEL:-demo-xnnpack}
FORMATS=${BENCH_FORMATS:-json}
CONCURRENCY=${BENCH_CONCURRENCY:-1 4}
ROUNDS=${BENCH_ROUNDS:-3}
DURATION=${BENCH_DURATION:-5}
JIT_WARMUP=${BENCH_JIT_WARMUP:-15}
JAR=${BENCH_JAR:-$ROOT/target/etserve-0.1.0-SNAPSHOT.jar}
log() { printf '[cpu-threadpool %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
mkdir -p "$OUT"

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
[[ -f models/$MODEL/1/model.pte ]] || { echo "no models/$MODEL" >&2; exit 1; }
bench_build
bench_require_free_ports "set BENCH_PORT" "$PORT" "$MGMT_PORT" $((PORT + 2)) $((PORT + 10)) $((PORT + 11)) $((PORT + 12))

declare -A URL GRPC PID
trap 'kill ${PID[pool]:-} ${PID[alone]:-} 2>/dev/null || true; wait 2>/dev/null || true' EXIT
cp "$JAR" "$OUT/etserve.jar"
for label in pool alone; do
  repo=$OUT/cpu-threadpool-$label
  rm -rf "$repo" && mkdir -p "$repo" && cp -r "models/$MODEL" "$repo/"
  [[ $label == pool ]] || printf '\ncpu-threadpool: false\n' >> "$repo/$MODEL/config.yml"
  base=$PORT
  [[ $label == pool ]] || base=$((PORT + 10))
  # shellcheck disable=SC2086  # a list of arguments
  PORT=$base MGMT_PORT=$((base + 1)) bench_start_service "$OUT/cpu-threadpool-$label.log" "$repo" \
    --etserve.grpc.port=$((base + 2)) ${BENCH_SERVICE_ARGS:-}
  URL[$label]=http://127.0.0.1:$base GRPC[$label]=$((base + 2)) PID[$label]=$SERVER_PID
  log "$label: ${URL[$label]}, pid ${PID[$label]} ($(grep -c 'cpu-threadpool' "$repo/$MODEL/config.yml" || true) cpu-threadpool line)"
done

loadgen() {  # loadgen LABEL FORMAT CONCURRENCY SECONDS [more LoadGenerator arguments]
  local label=$1 f=$2 c=$3 s=$4
  shift 4
  java -XX:+UseSerialGC -Xmx512m -cp "$CP" io.etserve.bench.LoadGenerator --url "${URL[$label]}" \
    --grpc-port "${GRPC[$label]}" --model "$MODEL" --reference "models/$MODEL/1/reference.json" --format "$f" \
    --concurrency "$c" --label "$label" "$@" --duration "$s"
}
RESULTS=$OUT/cpu-threadpool.jsonl
: > "$RESULTS"
log "JIT warm-up (not recorded): ${JIT_WARMUP} s per service, format and concurrency"
for label in pool alone; do
  for f in $FORMATS; do
    for c in $CONCURRENCY; do loadgen "$label" "$f" "$c" "$JIT_WARMUP" --warmup 0 > /dev/null; done
  done
done
failed=0
for round in $(seq "$ROUNDS"); do
  for f in $FORMATS; do
    for c in $CONCURRENCY; do
      for label in pool alone; do
        loadgen "$label" "$f" "$c" "$DURATION" --warmup 1 --server-pid "${PID[$label]}" --json-out "$RESULTS" >&2 \
          || failed=1
      done
    done
  done
done

python3 - "$RESULTS" "$MODEL" "$ROUNDS" > "$OUT/cpu-threadpool.md" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
print(f"{sys.argv[2]}, {sys.argv[3]} rounds, the project's load generator (one keep-alive connection per client); "
      "server CPU = the service's whole process from /proc; rounds separated by /; pool = the model as it is, "
      "alone = cpu-threadpool: false")
print()
print("| format | c | server CPU us/req: pool | alone | alone / pool (medians) | req/s: pool | alone | p50 us: pool | alone | p99 us: pool | alone |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
keys = sorted({(r["format"], r["concurrency"]) for r in rows})
med = lambda rs, k: statistics.median(r[k] for r in rs) if rs else 0
for f, c in keys:
    p = [r for r in rows if (r["format"], r["concurrency"], r["label"]) == (f, c, "pool")]
    a = [r for r in rows if (r["format"], r["concurrency"], r["label"]) == (f, c, "alone")]
    cpu = lambda rs: " / ".join(str(r.get("server_cpu_us_per_request", "n/a")) for r in rs)
    ratio = med(a, "server_cpu_us_per_request") / med(p, "server_cpu_us_per_request") if p and a else 0
    print(f"| {f} | {c} | {cpu(p)} | {cpu(a)} | **{ratio:.2f}** | {med(p, 'throughput_rps'):.0f} | "
          f"{med(a, 'throughput_rps'):.0f} | {med(p, 'p50_us'):.0f} | {med(a, 'p50_us'):.0f} | "
          f"{med(p, 'p99_us'):.0f} | {med(a, 'p99_us'):.0f} |")
errors = sum(r["errors"] for r in rows)
print()
print(f"errors (a wrong or failed answer): {errors}")
PY
cat "$OUT/cpu-threadpool.md"
exit $failed
