#!/usr/bin/env bash
# Clients that give up, against this build and against the code before it, in one run: one
# instance of the slow probe (each forward call holds it BENCH_HOLD_MS, 20 ms: a capacity of 50
# calls/s), BENCH_CLIENTS (64) clients that each give up after BENCH_GIVE_UP_MS (100) and retry
# at once (io.etserve.bench.AbandoningClients). Per service, three phases:
#   capacity  - 4 patient clients: what the instance serves when nobody gives up
#   give-up   - the impatient clients, plain requests
#   timeout   - the same clients sending the protocol's timeout parameter: the time they give
#               the request to start, BENCH_TIMEOUT_US (BENCH_GIVE_UP_MS - 2 x BENCH_HOLD_MS:
#               60 ms; the rest is the call and a margin as long, as a client that knows the
#               model's time would set it)
# Goodput is the answers that reached a client still waiting, per second.
# The baseline is BENCH_BASELINE (default main), built from `git archive` into target/bench with
# this tree's native libraries (the two must not differ in native/).
#   bench/abandoning.sh      -> target/bench/abandoning.md (and .jsonl)
# Knobs: BENCH_PORT (18080), BENCH_MGMT_PORT (18081), BENCH_WARMUP (3), BENCH_DURATION (20),
# BENCH_CLIENTS (64), BENCH_GIVE_UP_MS (100), BENCH_HOLD_MS (20), BENCH_TIMEOUT_US, BENCH_BASELINE
# (main: the code this branch starts from), BENCH_SERVICES ("baseline current").
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/target/bench
PORT=${BENCH_PORT:-18080}
MGMT_PORT=${BENCH_MGMT_PORT:-18081}
WARMUP=${BENCH_WARMUP:-3}
DURATION=${BENCH_DURATION:-20}
CLIENTS=${BENCH_CLIENTS:-64}
GIVE_UP_MS=${BENCH_GIVE_UP_MS:-100}
HOLD_MS=${BENCH_HOLD_MS:-20}
TIMEOUT_US=${BENCH_TIMEOUT_US:-$(( (GIVE_UP_MS - 2 * HOLD_MS) * 1000 ))}
SERVICES=${BENCH_SERVICES:-baseline current}
BASELINE=${BENCH_BASELINE:-main}
JAR=${BENCH_JAR:-$ROOT/target/etserve-0.1.0-SNAPSHOT.jar}
log() { printf '[abandoning %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
mkdir -p "$OUT"

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
bench_build
bench_require_free_ports "set BENCH_PORT / BENCH_MGMT_PORT" "$PORT" "$MGMT_PORT"
PROBE=$ROOT/target/native/testing/caller_stream_probe/libetserve_test_caller_stream_probe.so
[[ -f $PROBE ]] || { echo "the probe delegate is not built ($PROBE): run native/build.sh build" >&2; exit 1; }

bench_baseline_jar "$BASELINE" "$OUT/etserve-baseline.jar" abandoning-
cp "$JAR" "$OUT/etserve.jar"

REPO=$OUT/abandoning-models
rm -rf "$REPO"
mkdir -p "$REPO/slow"
cp -r src/test/resources/models/caller-stream-probe/1 "$REPO/slow/1"
printf 'inputs: [ { name: x } ]\noutputs: [ { name: observed } ]\ninstances: 1\n' > "$REPO/slow/config.yml"

RESULTS=$OUT/abandoning.jsonl
: > "$RESULTS"
clients() {
  java -XX:+UseSerialGC -Xmx256m -cp "$CP" io.etserve.bench.AbandoningClients --url "http://127.0.0.1:$PORT" \
    --management "http://127.0.0.1:$MGMT_PORT" --model slow --hold-ms "$HOLD_MS" --json-out "$RESULTS" "$@"
}
trap 'kill ${SERVER_PID:-} 2>/dev/null || true; wait 2>/dev/null || true' EXIT
declare -A LOAD_BEFORE LOAD_AFTER
for service in $SERVICES; do
  jar=$OUT/etserve.jar
  [[ $service == baseline ]] && jar=$OUT/etserve-baseline.jar
  cp "$jar" "$OUT/etserve-run.jar"
  log "$service: service on 127.0.0.1:$PORT"
  LOAD_BEFORE[$service]=$(cut -d' ' -f1-3 /proc/loadavg)
  "$SERVER_JAVA" --enable-native-access=ALL-UNNAMED -jar "$OUT/etserve-run.jar" \
    --server.address=127.0.0.1 --server.port="$PORT" --etserve.grpc.address=127.0.0.1 --etserve.grpc.port=0 \
    --management.server.address=127.0.0.1 --management.server.port="$MGMT_PORT" \
    --etserve.model-repository="$REPO" --etserve.native.extra-libraries="$PROBE" \
    > "$OUT/abandoning-$service-server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 120); do
    kill -0 "$SERVER_PID" 2>/dev/null || { tail -40 "$OUT/abandoning-$service-server.log" >&2; exit 1; }
    curl -sf -o /dev/null "http://127.0.0.1:$PORT/v2/health/ready" && break
    sleep 1
  done
  clients --clients 4 --give-up-ms 10000 --warmup 2 --duration 4 --label "$service warm-up" >/dev/null
  clients --clients 4 --give-up-ms 10000 --warmup "$WARMUP" --duration "$DURATION" --label "$service capacity" >&2
  clients --clients "$CLIENTS" --give-up-ms "$GIVE_UP_MS" --warmup "$WARMUP" --duration "$DURATION" \
    --label "$service give-up" >&2
  clients --clients "$CLIENTS" --give-up-ms "$GIVE_UP_MS" --timeout-us "$TIMEOUT_US" --warmup "$WARMUP" \
    --duration "$DURATION" --label "$service timeout" >&2
  curl -sf "http://127.0.0.1:$MGMT_PORT/actuator/prometheus" | grep -E '^etserve_inference_cancelled_total\{' \
    > "$OUT/abandoning-$service-cancelled.txt" || true
  LOAD_AFTER[$service]=$(cut -d' ' -f1-3 /proc/loadavg)
  kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true
done

{
  echo "host: $(nproc) CPUs; service: $("$SERVER_JAVA" -version 2>&1 | head -1); current: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (+ changes)'), baseline: $BASELINE ($BASE_COMMIT)"
  echo "slow probe, 1 instance, $HOLD_MS ms per forward call; $CLIENTS clients giving up after $GIVE_UP_MS ms and retrying at once;"
  echo "timeout phase: parameters.timeout = $TIMEOUT_US us; ${DURATION} s measured after ${WARMUP} s per phase"
  echo "command: bench/abandoning.sh (BENCH_CLIENTS=$CLIENTS BENCH_GIVE_UP_MS=$GIVE_UP_MS BENCH_HOLD_MS=$HOLD_MS BENCH_DURATION=$DURATION)"
  for service in $SERVICES; do
    echo "load average (1, 5, 15 min) around $service: ${LOAD_BEFORE[$service]:-?} before, ${LOAD_AFTER[$service]:-?} after"
  done
  echo
  python3 - "$RESULTS" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if "warm-up" not in l]
cap = {r["label"].split()[0]: r["goodput_per_s"] for r in rows if r["label"].endswith("capacity")}
print("| service | phase | goodput /s | of measured capacity | forward calls /s | wasted calls /s | gave up | 503 timeout | 503 other | p50 ms | p99 ms |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    service, phase = r["label"].split(" ", 1)
    c = cap.get(service)
    share = f'{r["goodput_per_s"] / c:.2f}' if c else ""
    print(f'| {service} | {phase} | {r["goodput_per_s"]} | {share} | {r["forward_calls_per_s"]} | {r["wasted_calls_per_s"]} '
          f'| {r["gave_up"]} | {r["timeout_expired_503"]} | {r["other_503"]} | {r["p50_ms"]} | {r["p99_ms"]} |')
PY
  echo
  for service in $SERVICES; do
    echo "$service: etserve_inference_cancelled_total at the end:"
    sed 's/^/    /' "$OUT/abandoning-$service-cancelled.txt" 2>/dev/null || true
    [[ -s $OUT/abandoning-$service-cancelled.txt ]] || echo "    (none)"
  done
} | tee "$OUT/abandoning.md"
