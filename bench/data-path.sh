#!/usr/bin/env bash
# Data-path benchmark: image-sized (1x3x224x224 FP32, 588 KiB) and 4 MiB tensors in and out
# through REST (binary extension and JSON), beside a transport-only baseline measured in the same
# run by the same load generator: bench EchoServer, which returns each request body as it came.
# Models: y = 2x + 1 (XNNPACK), exported with references on first use
# (scripts/export/export.sh --bench affine-image affine-4mib; needs the export venv).
#
# Knobs: BENCH_PORT (18080), BENCH_MGMT_PORT (18081), BENCH_ECHO_PORT (18082),
# BENCH_WARMUP (3) and BENCH_DURATION (10) seconds, BENCH_CONCURRENCY ("1 2"),
# BENCH_CHECK_EVERY (8: every 8th response's values are checked against the reference, the
# rest by status, so checking 1M floats does not starve the server on 2 cores).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/target/bench
PORT=${BENCH_PORT:-18080}
MGMT_PORT=${BENCH_MGMT_PORT:-18081}
ECHO_PORT=${BENCH_ECHO_PORT:-18082}
WARMUP=${BENCH_WARMUP:-3}
DURATION=${BENCH_DURATION:-10}
CONCURRENCY=${BENCH_CONCURRENCY:-1 2}
CHECK_EVERY=${BENCH_CHECK_EVERY:-8}
MODELS=(affine-image affine-4mib)
JAR=${BENCH_JAR:-$ROOT/target/etserve-0.1.0-SNAPSHOT.jar}
log() { printf '[data-path %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
mkdir -p "$OUT"

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
for m in "${MODELS[@]}"; do
  if [[ ! -f target/bench-models/$m/1/reference.json ]]; then
    log "exporting ${MODELS[*]} (scripts/export/export.sh --bench)"
    bash scripts/export/export.sh --bench "${MODELS[@]}" >&2
    break
  fi
done
bench_build
bench_require_free_ports "set BENCH_PORT / BENCH_MGMT_PORT / BENCH_ECHO_PORT" "$PORT" "$MGMT_PORT" "$ECHO_PORT"

REPO=$OUT/data-path-models
rm -rf "$REPO" && mkdir -p "$REPO"
for m in "${MODELS[@]}"; do ln -s "$ROOT/target/bench-models/$m" "$REPO/$m"; done
cp "$JAR" "$OUT/etserve.jar"
log "service on 127.0.0.1:$PORT, echo baseline on 127.0.0.1:$ECHO_PORT"
"$SERVER_JAVA" -cp "$CP" io.etserve.bench.EchoServer "$ECHO_PORT" > "$OUT/echo.log" 2>&1 &
ECHO_PID=$!
trap 'kill ${SERVER_PID:-} $ECHO_PID 2>/dev/null || true; wait 2>/dev/null || true' EXIT
bench_start_service "$OUT/data-path-server.log" "$REPO"

loadgen() {
  java -XX:+UseSerialGC -Xmx1g -cp "$CP" io.etserve.bench.LoadGenerator --check-every "$CHECK_EVERY" "$@"
}
RESULTS=$OUT/data-path.jsonl
: > "$RESULTS"
log "JIT warm-up (not recorded)"
for m in "${MODELS[@]}"; do
  for f in binary json; do
    loadgen --url "http://127.0.0.1:$PORT" --model "$m" --reference "$REPO/$m/1/reference.json" --format $f \
      --concurrency 2 --warmup 0 --duration 4 --label warm >/dev/null
  done
done
failed=0
for m in "${MODELS[@]}"; do
  ref="$REPO/$m/1/reference.json"
  for c in $CONCURRENCY; do
    loadgen --url "http://127.0.0.1:$ECHO_PORT" --model "$m" --reference "$ref" --format binary --echo true \
      --concurrency "$c" --warmup "$WARMUP" --duration "$DURATION" --server-pid "$ECHO_PID" \
      --label echo --json-out "$RESULTS" >&2 || failed=1
    for f in binary json; do
      loadgen --url "http://127.0.0.1:$PORT" --model "$m" --reference "$ref" --format $f \
        --concurrency "$c" --warmup "$WARMUP" --duration "$DURATION" --server-pid "$SERVER_PID" \
        --label rest --json-out "$RESULTS" >&2 || failed=1
    done
  done
done

{
  echo "host: $(nproc) CPUs; service: $("$SERVER_JAVA" -version 2>&1 | head -1); commit $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (+ changes)')"
  echo
  python3 - "$RESULTS" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
echo = {(r["model"], r["concurrency"]): r for r in rows if r["label"] == "echo"}
print("| model | format | c | req/s | tensor MB/s | echo baseline MB/s | ratio | p50 us | p99 us | server CPU us/req |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    if r["label"] != "rest":
        continue
    e = echo.get((r["model"], r["concurrency"]))
    base = e["tensor_mb_per_s"] if e else 0
    ratio = r["tensor_mb_per_s"] / base if base else 0
    print(f'| {r["model"]} | {r["format"]} | {r["concurrency"]} | {r["throughput_rps"]} | {r["tensor_mb_per_s"]} '
          f'| {base} | {ratio:.2f} | {r["p50_us"]} | {r["p99_us"]} | {r.get("server_cpu_us_per_request", "")} |')
PY
} | tee "$OUT/data-path.md"
exit $failed
