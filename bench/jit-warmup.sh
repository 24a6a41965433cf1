#!/usr/bin/env bash
# How long the JIT keeps compiling after a fresh start, at a paced request rate: a fresh service,
# BENCH_WARMUP (5) seconds of load unrecorded, then BENCH_WINDOWS (6) windows of BENCH_DURATION (8)
# seconds, each reporting the service's CPU per request by thread kind (the C1/C2 compiler threads
# apart) from the project's LoadGenerator, and the service's JIT log summarized per window
# (bench/jit-log-summary.py: first-time C2 compiles, recompilations, OSR, deoptimizations).
# One client, BENCH_PAUSE_US (3500) of think time between calls: about the rate of ResNet-18 on
# the H200 (~200 calls/s), where the GPU suite measured 0.7-0.8 ms of JIT CPU per call.
#
# usage: bench/jit-warmup.sh [model ...]   (default: affine-image demo-xnnpack; binary tensors)
# Knobs: BENCH_PORT (18090), BENCH_MGMT_PORT (18091), BENCH_GRPC_PORT (18092), BENCH_JAR.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/target/bench
PORT=${BENCH_PORT:-18090}
MGMT_PORT=${BENCH_MGMT_PORT:-18091}
GRPC_PORT=${BENCH_GRPC_PORT:-18092}
WARMUP=${BENCH_WARMUP:-5}
DURATION=${BENCH_DURATION:-8}
WINDOWS=${BENCH_WINDOWS:-6}
PAUSE_US=${BENCH_PAUSE_US:-3500}
JAR=${BENCH_JAR:-$ROOT/target/etserve-0.1.0-SNAPSHOT.jar}
MODELS=("$@")
((${#MODELS[@]})) || MODELS=(affine-image demo-xnnpack)
log() { printf '[jit-warmup %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
mkdir -p "$OUT"

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
bench_build
bench_require_free_ports "set BENCH_PORT / BENCH_MGMT_PORT / BENCH_GRPC_PORT" "$PORT" "$MGMT_PORT" "$GRPC_PORT"
REPO=$OUT/jit-warmup-models
rm -rf "$REPO" && mkdir -p "$REPO"
for m in "${MODELS[@]}"; do
  if [[ -d $ROOT/models/$m ]]; then
    ln -s "$ROOT/models/$m" "$REPO/$m"
  else
    [[ -f target/bench-models/$m/1/reference.json ]] || bash scripts/export/export.sh --bench "$m" >&2
    ln -s "$ROOT/target/bench-models/$m" "$REPO/$m"
  fi
done
cp "$JAR" "$OUT/etserve.jar"
trap 'kill ${SERVER_PID:-} 2>/dev/null || true; wait 2>/dev/null || true' EXIT

RESULTS=$OUT/jit-warmup.jsonl
: > "$RESULTS"
REPORT=$OUT/jit-warmup.md
{ echo "host: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); service: $("$SERVER_JAVA" -version 2>&1 | head -1); commit $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (+ changes)')"
  echo "fresh service per model; ${WARMUP} s unrecorded, then ${WINDOWS} x ${DURATION} s; one client, ${PAUSE_US} us pause between calls"; } > "$REPORT"
for m in "${MODELS[@]}"; do
  jit_log=$OUT/jit-warmup-$m.log
  SERVICE_JAVA_OPTS="-Xlog:jit+compilation=debug,deoptimization=debug:file=$jit_log:uptime,tags" \
    bench_start_service "$OUT/jit-warmup-$m-server.log" "$REPO" --etserve.grpc.port="$GRPC_PORT"
  ref=$REPO/$m/1/reference.json
  loadgen() {
    java -XX:+UseSerialGC -Xmx1g -cp "$CP" io.etserve.bench.LoadGenerator --check-every 8 \
      --url "http://127.0.0.1:$PORT" --model "$m" --reference "$ref" --format binary --concurrency 1 \
      --pause-us "$PAUSE_US" --warmup 0 "$@"
  }
  loadgen --duration "$WARMUP" --label warm > /dev/null
  windows=()
  for w in $(seq "$WINDOWS"); do
    up0=$(ps -o etimes= -p "$SERVER_PID" | tr -d ' ')
    loadgen --duration "$DURATION" --server-pid "$SERVER_PID" --label "$m-w$w" --json-out "$RESULTS" >&2
    windows+=("$w $up0 $(ps -o etimes= -p "$SERVER_PID" | tr -d ' ')")
  done
  kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true
  {
    echo
    echo "## $m"
    echo
    echo "| window | service uptime s | req/s | server CPU us/req | by thread kind (us/req) |"
    echo "|---|---|---|---|---|"
    for w in "${windows[@]}"; do
      read -r n u0 u1 <<< "$w"
      python3 - "$RESULTS" "$m-w$n" "$n" "$u0-$u1" <<'PY'
import json, sys
row = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["label"] == sys.argv[2]][-1]
print(f'| {sys.argv[3]} | {sys.argv[4]} | {row["throughput_rps"]} | {row.get("server_cpu_us_per_request")} '
      f'| {row.get("server_cpu_us_per_request_by_thread", "")} |')
PY
    done
    read -r _ first _ <<< "${windows[0]}"
    read -r _ _ last <<< "${windows[-1]}"
    echo
    echo '```'
    python3 bench/jit-log-summary.py "$jit_log" --window "$DURATION" --from "$first" --to "$last"
    echo '```'
  } >> "$REPORT"
done
cat "$REPORT"
