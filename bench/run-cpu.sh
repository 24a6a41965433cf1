#!/usr/bin/env bash
# CPU benchmark: in-process ProgramInstance.execute (JMH) against the REST path of the running
# service (LoadGenerator, loopback only), for demo-portable and demo-xnnpack. Prints a summary
# table; everything it writes goes to target/bench/. See bench/README.md.
#
# Knobs (environment):
#   BENCH_PORT (18080) and BENCH_MGMT_PORT (18081): loopback ports for the service
#   BENCH_WARMUP (5) and BENCH_DURATION (15): seconds per load-generator run
#   BENCH_GRPC_PORT (18001): loopback port for the service's gRPC
#   BENCH_CONCURRENCY ("1 2"), BENCH_MODELS ("demo-portable demo-xnnpack"), BENCH_FORMATS ("json binary grpc")
#   BENCH_PAUSES_US ("0"): each client's pause after each answer, in us (2000: the server idles
#   between calls as it does while a 2 ms GPU kernel runs)
#   JMH_ARGS ("-wi 3 -i 5 -f 1 -w 2s -r 3s"); BENCH_SKIP_JMH=1 or BENCH_SKIP_REST=1 to run one half
#   BENCH_JAR (this tree's jar, rebuilt when older than the sources) and BENCH_OUT (target/bench)
#   BENCH_SERVICE_ARGS: more arguments for the service (--etserve.tracing.enabled=true ...)
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${BENCH_OUT:-$ROOT/target/bench}
PORT=${BENCH_PORT:-18080}
MGMT_PORT=${BENCH_MGMT_PORT:-18081}
WARMUP=${BENCH_WARMUP:-5}
DURATION=${BENCH_DURATION:-15}
CONCURRENCY=${BENCH_CONCURRENCY:-1 2}
MODELS=${BENCH_MODELS:-demo-portable demo-xnnpack}
FORMATS=${BENCH_FORMATS:-json binary grpc}
PAUSES=${BENCH_PAUSES_US:-0}
GRPC_PORT=${BENCH_GRPC_PORT:-18001}
JMH_ARGS=${JMH_ARGS:--wi 3 -i 5 -f 1 -w 2s -r 3s}
# BENCH_JAR: another build of the service to measure (bench/cpu-statistics.sh); not rebuilt.
JAR=${BENCH_JAR:-$ROOT/target/etserve-0.1.0-SNAPSHOT.jar}

log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

mkdir -p "$OUT"
# The summary sets this run's halves side by side: a skipped half leaves none of an earlier run's numbers.
[[ ${BENCH_SKIP_JMH:-0} != 1 ]] || echo '[]' > "$OUT/jmh.json"
[[ ${BENCH_SKIP_REST:-0} != 1 ]] || : > "$OUT/rest.jsonl"

# --- build -----------------------------------------------------------------------------------
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
bench_build
if [[ ! -f target/test-classes/META-INF/BenchmarkList ]] \
   || ! grep -q BridgeExecuteBenchmark target/test-classes/META-INF/BenchmarkList; then
  echo "target/test-classes/META-INF/BenchmarkList is missing: JMH's annotation processor did not run" >&2
  exit 1
fi

{
  echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')," \
       "$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), load before run: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "java (service): $("$SERVER_JAVA" -version 2>&1 | head -1)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (+ uncommitted changes)')"
} > "$OUT/machine.txt"
cat "$OUT/machine.txt" >&2

# --- in process ------------------------------------------------------------------------------
if [[ ${BENCH_SKIP_JMH:-0} != 1 ]]; then
  log "JMH: BridgeExecuteBenchmark $JMH_ARGS"
  # shellcheck disable=SC2086  # JMH_ARGS is a list of options
  java -cp "$CP" org.openjdk.jmh.Main BridgeExecuteBenchmark $JMH_ARGS \
    -rf json -rff "$OUT/jmh.json" > "$OUT/jmh.log" 2>&1 || { tail -40 "$OUT/jmh.log" >&2; exit 1; }
  sed -n '/^Benchmark /,$p' "$OUT/jmh.log" >&2
fi

# --- REST ------------------------------------------------------------------------------------
if [[ ${BENCH_SKIP_REST:-0} != 1 ]]; then
  bench_require_free_ports "set BENCH_PORT / BENCH_MGMT_PORT / BENCH_GRPC_PORT" "$PORT" "$MGMT_PORT" "$GRPC_PORT"
  # A private copy: a concurrent `mvn package` must not replace the jar under the running JVM.
  cp "${BENCH_JAR:-$JAR}" "$OUT/etserve.jar"
  log "starting the service on 127.0.0.1:$PORT (log: $OUT/server.log)"
  "$SERVER_JAVA" --enable-native-access=ALL-UNNAMED -jar "$OUT/etserve.jar" \
    --server.address=127.0.0.1 --server.port="$PORT" --etserve.grpc.address=127.0.0.1 \
    --etserve.grpc.port="$GRPC_PORT" \
    --management.server.address=127.0.0.1 --management.server.port="$MGMT_PORT" \
    --etserve.model-repository="$ROOT/models" ${BENCH_SERVICE_ARGS:-} > "$OUT/server.log" 2>&1 &
  SERVER_PID=$!
  stop_server() {
    if kill -0 "$SERVER_PID" 2>/dev/null; then
      kill "$SERVER_PID"
      wait "$SERVER_PID" 2>/dev/null || true
    fi
  }
  trap stop_server EXIT

  ready=0
  for _ in $(seq 120); do
    kill -0 "$SERVER_PID" 2>/dev/null || { tail -40 "$OUT/server.log" >&2; echo "the service exited" >&2; exit 1; }
    if curl -sf -o /dev/null "http://127.0.0.1:$PORT/v2/health/ready"; then ready=1; break; fi
    sleep 1
  done
  [[ $ready == 1 ]] || { echo "the service was not ready within 120 s" >&2; exit 1; }

  # The load generator gets a small serial-GC heap: fewer threads competing with the server.
  loadgen() {
    java -XX:+UseSerialGC -Xmx256m -cp "$CP" io.etserve.bench.LoadGenerator \
      --url "http://127.0.0.1:$PORT" --grpc-port "$GRPC_PORT" --server-pid "$SERVER_PID" "$@"
  }
  # One unrecorded pass so the first measured run does not pay for the server's JIT warmup.
  log "server JIT warmup (not recorded)"
  for f in $FORMATS; do
    for m in $MODELS; do
      loadgen --model "$m" --format "$f" --concurrency 2 --warmup 0 --duration 5 --label jit-warmup >&2
    done
  done

  : > "$OUT/rest.jsonl"
  failed=0
  for m in $MODELS; do
    for f in $FORMATS; do
      for c in $CONCURRENCY; do
        for p in $PAUSES; do
          loadgen --model "$m" --format "$f" --concurrency "$c" --warmup "$WARMUP" --duration "$DURATION" \
            --pause-us "$p" --json-out "$OUT/rest.jsonl" --label rest >&2 || failed=1
        done
      done
    done
  done
  stop_server
  trap - EXIT
  grep -E ' ERROR |Exception' "$OUT/server.log" | head -5 >&2 || true
fi

# --- summary ---------------------------------------------------------------------------------
if [[ -f $OUT/jmh.json && -f $OUT/rest.jsonl ]]; then
  java -cp "$CP" io.etserve.bench.BenchReport "$OUT/jmh.json" "$OUT/rest.jsonl" > "$OUT/summary.md"
  echo
  cat "$OUT/machine.txt"
  echo
  cat "$OUT/summary.md"
fi
if [[ ${failed:-0} == 1 ]]; then
  echo "some load-generator runs saw errors (see above)" >&2
  exit 1
fi
