#!/usr/bin/env bash
# Dynamic-batching benchmark: one-row requests to a weight-heavy MLP (1024 -> 2048 -> 2048 ->
# 1024, 32 MB of float32 weights, XNNPACK, batch 1..32), closed loop at concurrency 1, 4 and 16,
# the same program served three times by one service in one run: "mlp" runs every request alone
# (the CPU default of 2 instances); "mlp-batched" has dynamic-batching (max-batch-size 32,
# max-queue-delay BENCH_DELAY) on 2 instances, "mlp-batched-1" the same on 1 instance (one
# batch at a time gets both cores and XNNPACK's one thread pool, and batches grow larger).
# Outputs are checked against PyTorch's (every 4th response).
# The program is exported on first use (scripts/export/export.sh --bench batch-mlp; needs the
# export venv).
#
# Knobs: BENCH_PORT (18080), BENCH_MGMT_PORT (18081), BENCH_WARMUP (3) and BENCH_DURATION (10)
# seconds, BENCH_CONCURRENCY ("1 4 16"), BENCH_DELAY (500us), BENCH_FORMAT (binary).
#   bench/batching.sh      -> target/bench/batching.md (and .jsonl)
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/target/bench
PORT=${BENCH_PORT:-18080}
MGMT_PORT=${BENCH_MGMT_PORT:-18081}
WARMUP=${BENCH_WARMUP:-3}
DURATION=${BENCH_DURATION:-10}
CONCURRENCY=${BENCH_CONCURRENCY:-1 4 16}
DELAY=${BENCH_DELAY:-500us}
MODELS=(mlp mlp-batched mlp-batched-1)
FORMAT=${BENCH_FORMAT:-binary}
JAR=${BENCH_JAR:-$ROOT/target/etserve-0.1.0-SNAPSHOT.jar}
log() { printf '[batching %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
mkdir -p "$OUT"

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
bench_export_batch_mlp
bench_build
bench_require_free_ports "set BENCH_PORT / BENCH_MGMT_PORT" "$PORT" "$MGMT_PORT"

REPO=$OUT/batching-models
rm -rf "$REPO"
for m in "${MODELS[@]}"; do
  mkdir -p "$REPO/$m" && ln -s "$ROOT/target/bench-models/batch-mlp/1" "$REPO/$m/1"
done
IO='inputs: [ { name: x, dims: [-1, 1024] } ]\noutputs: [ { name: y } ]\n'
printf "$IO" > "$REPO/mlp/config.yml"
printf "${IO}instances: 2\ndynamic-batching: { max-batch-size: 32, max-queue-delay: %s }\n" "$DELAY" \
  > "$REPO/mlp-batched/config.yml"
printf "${IO}instances: 1\ndynamic-batching: { max-batch-size: 32, max-queue-delay: %s }\n" "$DELAY" \
  > "$REPO/mlp-batched-1/config.yml"
cp "$JAR" "$OUT/etserve.jar"
log "service on 127.0.0.1:$PORT"
trap 'kill ${SERVER_PID:-} 2>/dev/null || true; wait 2>/dev/null || true' EXIT
bench_start_service "$OUT/batching-server.log" "$REPO"

REF=$REPO/mlp/1/reference.json
loadgen() {
  java -XX:+UseSerialGC -Xmx512m -cp "$CP" io.etserve.bench.LoadGenerator --url "http://127.0.0.1:$PORT" \
    --reference "$REF" --format "$FORMAT" --check-every 4 "$@"
}
# Forward calls and rows so far, from the management port's Prometheus text.
exec_counts() {
  curl -sf "http://127.0.0.1:$MGMT_PORT/actuator/prometheus" \
    | awk -v m="$1" '$1 ~ "^nv_inference_exec_count\\{model=\""m"\"" {e=$2} $1 ~ "^nv_inference_count\\{model=\""m"\"" {n=$2} END {printf "%d %d\n", e, n}'
}
RESULTS=$OUT/batching.jsonl
: > "$RESULTS"
log "JIT warm-up (not recorded)"
for m in "${MODELS[@]}"; do
  loadgen --model "$m" --concurrency 4 --warmup 0 --duration 4 --label warm >/dev/null
done
failed=0
for c in $CONCURRENCY; do
  for m in "${MODELS[@]}"; do
    read -r e0 n0 < <(exec_counts "$m")
    loadgen --model "$m" --concurrency "$c" --warmup "$WARMUP" --duration "$DURATION" --server-pid "$SERVER_PID" \
      --label "$m" --json-out "$RESULTS" >&2 || failed=1
    read -r e1 n1 < <(exec_counts "$m")
    # Rows per forward call over the whole step (warm-up included): the batch size it ran at.
    python3 - "$RESULTS" "$((e1 - e0))" "$((n1 - n0))" <<'PY'
import json, sys
path, execs, rows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
lines = open(path).read().splitlines()
last = json.loads(lines[-1])
last["rows_per_forward_call"] = round(rows / execs, 2) if execs else None
lines[-1] = json.dumps(last)
open(path, "w").write("\n".join(lines) + "\n")
PY
  done
done

{
  echo "host: $(nproc) CPUs; service: $("$SERVER_JAVA" -version 2>&1 | head -1); commit $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (+ changes)')"
  echo "batch-mlp (32 MB FP32 weights, XNNPACK), one-row $FORMAT requests; mlp: alone, 2 instances;"
  echo "mlp-batched: 2 instances, mlp-batched-1: 1 instance, both max-batch-size 32, max-queue-delay $DELAY"
  echo
  python3 - "$RESULTS" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
alone = {r["concurrency"]: r for r in rows if r["label"] == "mlp"}
print("| c | model | req/s | p50 us | p99 us | rows per forward call | server CPU us/req | throughput x | p99 x |")
print("|---|---|---|---|---|---|---|---|---|")
for r in rows:
    a = alone.get(r["concurrency"])
    tx = r["throughput_rps"] / a["throughput_rps"] if a and a["throughput_rps"] else 0
    px = r["p99_us"] / a["p99_us"] if a and a["p99_us"] else 0
    print(f'| {r["concurrency"]} | {r["label"]} | {r["throughput_rps"]} | {r["p50_us"]} | {r["p99_us"]} '
          f'| {r.get("rows_per_forward_call")} | {r.get("server_cpu_us_per_request", "")} | {tx:.2f} | {px:.2f} |')
PY
} | tee "$OUT/batching.md"
exit $failed
