#!/usr/bin/env bash
# Data-path benchmark: image-sized (1x3x224x224 FP32, 588 KiB) and 4 MiB tensors in and out
# through REST (binary extension and JSON) and gRPC, beside a transport-only baseline measured in
# the same run by the same load generator: bench EchoServer, which returns each request body as
# it came. Models: y = 2x + 1 (XNNPACK), exported with references on first use
# (scripts/export/export.sh --bench ...; needs the export venv): affine-image and affine-4mib as
# users export by default (inputs and outputs memory-planned: the bridge copies each input in and
# each output out), and the same two exported with unplanned inputs and outputs (-unplanned:
# ExecuTorch reads the request's buffer and writes the response's; docs/large-tensors.md).
#
# Knobs: BENCH_PORT (18080), BENCH_MGMT_PORT (18081), BENCH_ECHO_PORT (18082), BENCH_GRPC_PORT
# (18083; a baseline's gRPC port is BENCH_PORT + 12), BENCH_WARMUP (3) and BENCH_DURATION (10)
# seconds, BENCH_CONCURRENCY ("1 2"), BENCH_CHECK_EVERY (8: every 8th response's values are
# checked against the reference, the rest by status, so checking 1M floats does not starve the
# server on 2 cores), BENCH_MODELS (the four above), BENCH_FORMATS ("binary json"; grpc: the
# same tensors as a ModelInfer call with raw_input_contents, grpc-java's client), BENCH_ROUNDS
# (1: rounds of every measured run, interleaved, for medians on a noisy machine),
# BENCH_JIT_WARMUP (20: seconds of load per model before anything is recorded; the request
# path's C2 compiles take tens of seconds at a few hundred requests/s, bench/README.md),
# BENCH_BASELINE_JAR (a second build served beside this one on BENCH_PORT + 10, measured in the
# same rounds, label "base"; it gets no -unplanned model unless BENCH_BASELINE_UNPLANNED=1: a
# build before c92c626 leaves such outputs pointing nowhere and XNNPACK's write kills the JVM),
# BENCH_SERVICE_ARGS (more arguments for the service; BENCH_BASELINE_ARGS, even empty, for the
# baseline's when they differ: BENCH_BASELINE_JAR may be this jar, to compare two settings),
# BENCH_SERVER_CPUS (taskset -c list for the service and the echo), BENCH_CP (test classes and
# libraries already built: no Maven, as on a GPU host: scripts/gpu-suite.sh data-path).
#
# Beside the server's CPU per request, the table gives the model's own forward call's CPU (bench
# ForwardCost: the same program called back to back, one call at a time, in a JVM of its own on
# the service's CPUs, its data in the caches and in memory) and the difference from the second,
# the serving path's own CPU per request, to set beside the echo's CPU per request.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/target/bench
PORT=${BENCH_PORT:-18080}
MGMT_PORT=${BENCH_MGMT_PORT:-18081}
ECHO_PORT=${BENCH_ECHO_PORT:-18082}
GRPC_PORT=${BENCH_GRPC_PORT:-18083}
WARMUP=${BENCH_WARMUP:-3}
DURATION=${BENCH_DURATION:-10}
CONCURRENCY=${BENCH_CONCURRENCY:-1 2}
CHECK_EVERY=${BENCH_CHECK_EVERY:-8}
read -r -a MODELS <<< "${BENCH_MODELS:-affine-image affine-4mib affine-image-unplanned affine-4mib-unplanned}"
JIT_WARMUP=${BENCH_JIT_WARMUP:-20}
FORMATS=${BENCH_FORMATS:-binary json}
ROUNDS=${BENCH_ROUNDS:-1}
BASE_JAR=${BENCH_BASELINE_JAR:-}
BASE_ARGS=${BENCH_BASELINE_ARGS-${BENCH_SERVICE_ARGS:-}}  # set and empty: the baseline gets none
BASE_PORT=$((PORT + 10))
JAR=${BENCH_JAR:-$ROOT/target/etserve-0.1.0-SNAPSHOT.jar}
log() { printf '[data-path %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
mkdir -p "$OUT"

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
for m in "${MODELS[@]}"; do
  if [[ ! -f target/bench-models/$m/1/reference.json ]]; then
    log "exporting ${MODELS[*]} (scripts/export/export.sh --bench)"
    bash scripts/export/export.sh --bench "$m" >&2
  fi
done
bench_build
bench_require_free_ports "set BENCH_PORT / BENCH_MGMT_PORT / BENCH_ECHO_PORT / BENCH_GRPC_PORT" "$PORT" "$MGMT_PORT" \
  "$ECHO_PORT" "$GRPC_PORT" ${BASE_JAR:+"$BASE_PORT" "$((BASE_PORT + 1))" "$((BASE_PORT + 2))"}

REPO=$OUT/data-path-models
rm -rf "$REPO" && mkdir -p "$REPO"
for m in "${MODELS[@]}"; do ln -s "$ROOT/target/bench-models/$m" "$REPO/$m"; done
cp "$JAR" "$OUT/etserve.jar"
log "service on 127.0.0.1:$PORT, echo baseline on 127.0.0.1:$ECHO_PORT"
# The echo runs where the service does (BENCH_SERVER_CPUS), so the ratio compares like with like.
${BENCH_SERVER_CPUS:+taskset -c "$BENCH_SERVER_CPUS"} "$SERVER_JAVA" -cp "$CP" io.etserve.bench.EchoServer "$ECHO_PORT" \
  > "$OUT/echo.log" 2>&1 &
ECHO_PID=$!
trap 'kill ${SERVER_PID:-} ${BASE_PID:-} $ECHO_PID 2>/dev/null || true; wait 2>/dev/null || true' EXIT
declare -A SERVICE_PORT SERVICE_PID SERVICE_GRPC_PORT
LABELS=(rest)
if [[ -n $BASE_JAR ]]; then
  log "baseline $BASE_JAR on 127.0.0.1:$BASE_PORT"
  # A copy, so a rebuild during the run cannot change it; an extracted jar (lib/ beside it) in place.
  base_jar=$BASE_JAR
  [[ -d $(dirname "$BASE_JAR")/lib ]] || { cp "$BASE_JAR" "$OUT/etserve-base.jar"; base_jar=$OUT/etserve-base.jar; }
  # shellcheck disable=SC2086  # a list of arguments
  SERVICE_JAR=$base_jar PORT=$BASE_PORT MGMT_PORT=$((BASE_PORT + 1)) \
    bench_start_service "$OUT/data-path-base-server.log" "$REPO" --etserve.grpc.port=$((BASE_PORT + 2)) $BASE_ARGS
  BASE_PID=$SERVER_PID
  SERVICE_PORT[base]=$BASE_PORT SERVICE_PID[base]=$BASE_PID SERVICE_GRPC_PORT[base]=$((BASE_PORT + 2))
  LABELS=(base rest)
fi
cp "$JAR" "$OUT/etserve.jar"
# shellcheck disable=SC2086  # a list of arguments
bench_start_service "$OUT/data-path-server.log" "$REPO" --etserve.grpc.port="$GRPC_PORT" ${BENCH_SERVICE_ARGS:-}
SERVICE_PORT[rest]=$PORT SERVICE_PID[rest]=$SERVER_PID SERVICE_GRPC_PORT[rest]=$GRPC_PORT

loadgen() {
  java -XX:+UseSerialGC -Xmx1g -cp "$CP" io.etserve.bench.LoadGenerator --check-every "$CHECK_EVERY" "$@"
}
RESULTS=$OUT/data-path.jsonl
: > "$RESULTS"
serves() {  # serves LABEL MODEL
  [[ $1 != base || $2 != *-unplanned || -n ${BENCH_BASELINE_UNPLANNED:-} ]]
}
log "JIT warm-up (not recorded): ${JIT_WARMUP} s per model and format and service"
for label in "${LABELS[@]}"; do
  for m in "${MODELS[@]}"; do
    serves "$label" "$m" || continue
    for f in $FORMATS; do
      seconds=$JIT_WARMUP
      [[ $f != json ]] || seconds=$((JIT_WARMUP / 4 + 1))  # JSON's own code is small; 4 MiB of it is slow
      loadgen --url "http://127.0.0.1:${SERVICE_PORT[$label]}" --grpc-port "${SERVICE_GRPC_PORT[$label]}" \
        --model "$m" --reference "$REPO/$m/1/reference.json" --format $f --concurrency 2 --warmup 0 \
        --duration "$seconds" --label warm >/dev/null
    done
  done
done
failed=0
for round in $(seq "$ROUNDS"); do
for m in "${MODELS[@]}"; do
  ref="$REPO/$m/1/reference.json"
  for c in $CONCURRENCY; do
    loadgen --url "http://127.0.0.1:$ECHO_PORT" --model "$m" --reference "$ref" --format binary --echo true \
      --concurrency "$c" --warmup "$WARMUP" --duration "$DURATION" --server-pid "$ECHO_PID" \
      --label echo --json-out "$RESULTS" >&2 || failed=1
    for f in $FORMATS; do
      for label in "${LABELS[@]}"; do
        serves "$label" "$m" || continue
        loadgen --url "http://127.0.0.1:${SERVICE_PORT[$label]}" --grpc-port "${SERVICE_GRPC_PORT[$label]}" \
          --model "$m" --reference "$ref" --format $f \
          --concurrency "$c" --warmup "$WARMUP" --duration "$DURATION" --server-pid "${SERVICE_PID[$label]}" \
          --label "$label" --json-out "$RESULTS" >&2 || failed=1
      done
    done
  done
done
done

# The model's own share of the server's CPU: its forward calls back to back in a JVM of their own,
# on the service's CPUs, with the service's CPU threadpool size (bench ForwardCost), with the data
# in the caches and in memory. What is left of the server's CPU per request after the second is
# the serving path's own cost: transport, protocol and bridge.
FORWARD=$OUT/data-path-forward.txt
: > "$FORWARD"
cpu_threads_in() {  # the etserve.native.cpu-threads in a list of service arguments, 0 (the default) without
  local re='--etserve\.native\.cpu-threads=([0-9]+)'
  if [[ $1 =~ $re ]]; then echo "${BASH_REMATCH[1]}"; else echo 0; fi
}
for label in "${LABELS[@]}"; do
  args=${BENCH_SERVICE_ARGS:-}
  [[ $label != base ]] || args=$BASE_ARGS
  for m in "${MODELS[@]}"; do
    serves "$label" "$m" || continue
    line=$(${BENCH_SERVER_CPUS:+taskset -c "$BENCH_SERVER_CPUS"} "$SERVER_JAVA" --enable-native-access=ALL-UNNAMED \
      -cp "$CP" io.etserve.bench.ForwardCost "$REPO/$m/1" "$(( (DURATION + 1) / 2 ))" "$(cpu_threads_in "$args")" 2>&1 \
      | grep '^forward ') || { log "ForwardCost failed for $m"; failed=1; continue; }
    while read -r l; do
      log "$label $l"
      echo "$label $l" >> "$FORWARD"
    done <<< "$line"
  done
done

{
  echo "host: $(nproc --all) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); service: $("$SERVER_JAVA" -version 2>&1 | head -1); commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' (+ changes)')${BASE_JAR:+; base: $BASE_JAR}${BENCH_SERVER_CPUS:+; service and echo on CPUs $BENCH_SERVER_CPUS}${BENCH_SERVICE_ARGS:+; service arguments: $BENCH_SERVICE_ARGS}${BASE_JAR:+${BENCH_BASELINE_ARGS+; base: ${BENCH_BASELINE_ARGS:-no arguments}}}"
  echo
  python3 - "$RESULTS" "$FORWARD" <<'PY'
import json, re, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
# Each row beside the echo of its own round: the echo runs first in every round, so the latest
# one seen for the same model and concurrency.
echo = {}
# "rest forward affine-4mib cold: 9876 calls, 310 us wall, 322 us CPU per call (...)"
forward = {}
for line in open(sys.argv[2]):
    m = re.match(r"(\S+) forward (\S+) (hot|cold): .* ([0-9.]+) us CPU per call", line)
    if m:
        forward[(m.group(1), m.group(2), m.group(3))] = float(m.group(4))
def jit(r):
    # LoadGenerator's CPU by thread kind: "qtp#-#=595 C# CompilerThre=89 ..." (C1 and C2 threads)
    m = re.search(r"C# CompilerThre#*=(\d+)", r.get("server_cpu_us_per_request_by_thread", "") or "")
    return m.group(1) if m else "<1 %"
print("| service | model | format | c | req/s | tensor MB/s | echo MB/s | ratio | p50 us | p99 us | server CPU us/req "
      "| JIT us/req | forward CPU us, hot / cold cache | serving path us/req | echo CPU us/req |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    if r["label"] == "echo":
        echo[(r["model"], r["concurrency"])] = r
        continue
    e = echo.get((r["model"], r["concurrency"]))
    base = e["tensor_mb_per_s"] if e else 0
    ratio = r["tensor_mb_per_s"] / base if base else 0
    cpu = r.get("server_cpu_us_per_request")
    hot, fwd = (forward.get((r["label"], r["model"], k)) for k in ("hot", "cold"))
    own = f"{cpu - fwd:.0f}" if cpu is not None and fwd is not None else ""
    print(f'| {r["label"]} | {r["model"]} | {r["format"]} | {r["concurrency"]} | {r["throughput_rps"]} | {r["tensor_mb_per_s"]} '
          f'| {base} | {ratio:.2f} | {r["p50_us"]} | {r["p99_us"]} | {cpu if cpu is not None else ""} | {jit(r)} '
          f'| {"" if fwd is None else f"{hot:.0f} / {fwd:.0f}"} | {own} | {e.get("server_cpu_us_per_request", "") if e else ""} |')
PY
} | tee "$OUT/data-path.md"
exit $failed
