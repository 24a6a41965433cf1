#!/usr/bin/env bash
# Java heap allocated per small request, whole service: the packaged service on loopback, warmed
# up by the project's LoadGenerator, then JFR's per-thread allocation counters
# (jdk.ThreadAllocationStatistics, every thread, once a second) over one measured run at
# concurrency 1. Bytes per request = the counters' growth over the recording, summed over threads,
# divided by the run's requests (the recording brackets the run by ~1.5 s each side, when nothing
# is served). Writes target/bench/allocation.md; the busiest threads beside each figure.
#
# Knobs (environment): BENCH_MODEL (demo-xnnpack), BENCH_FORMATS ("json binary"; grpc too),
# BENCH_WARMUP (20, seconds of unrecorded load per format), BENCH_DURATION (6, seconds measured),
# BENCH_PORT (18080), BENCH_MGMT_PORT (18081), BENCH_GRPC_PORT (18001), BENCH_JAR (this tree's jar,
# rebuilt when older than the sources), BENCH_SERVICE_ARGS (more arguments for the service).
# Needs a JDK's jcmd and jfr next to the service's java (scripts/java-home.sh).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${BENCH_OUT:-$ROOT/target/bench}
JAR=$ROOT/target/etserve-0.1.0-SNAPSHOT.jar
PORT=${BENCH_PORT:-18080}
MGMT_PORT=${BENCH_MGMT_PORT:-18081}
GRPC_PORT=${BENCH_GRPC_PORT:-18001}
MODEL=${BENCH_MODEL:-demo-xnnpack}
FORMATS=${BENCH_FORMATS:-json binary}
WARMUP=${BENCH_WARMUP:-20}
DURATION=${BENCH_DURATION:-6}

log() { printf '[allocation %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
JDK_BIN=$(dirname "$(command -v "$SERVER_JAVA")")
for tool in jcmd jfr; do
  [[ -x $JDK_BIN/$tool ]] || { echo "$JDK_BIN/$tool is missing: a JDK (not a JRE) is needed" >&2; exit 1; }
done
mkdir -p "$OUT"
bench_build
bench_require_free_ports "set BENCH_PORT / BENCH_MGMT_PORT / BENCH_GRPC_PORT" "$PORT" "$MGMT_PORT" "$GRPC_PORT"
cp "${BENCH_JAR:-$JAR}" "$OUT/etserve.jar"

# shellcheck disable=SC2086
bench_start_service "$OUT/allocation-server.log" "$ROOT/models" --etserve.grpc.port="$GRPC_PORT" ${BENCH_SERVICE_ARGS:-}
trap 'kill "$SERVER_PID" 2>/dev/null || true' EXIT

loadgen() {
  java -XX:+UseSerialGC -Xmx256m -cp "$CP" io.etserve.bench.LoadGenerator --url "http://127.0.0.1:$PORT" \
    --grpc-port "$GRPC_PORT" --server-pid "$SERVER_PID" --model "$MODEL" "$@"
}

{
  echo "# Allocation per request: $MODEL, c = 1, ${DURATION} s after ${WARMUP} s of warm-up per format"
  echo
  echo "$("$SERVER_JAVA" -version 2>&1 | head -1); jar $(sha256sum "$OUT/etserve.jar" | cut -c1-12); ${BENCH_SERVICE_ARGS:-no extra arguments}"
  echo
  echo "| format | requests | bytes/request | top threads (bytes/request) |"
  echo "|---|---|---|---|"
} > "$OUT/allocation.md"

for f in $FORMATS; do
  log "$f: ${WARMUP} s of warm-up"
  loadgen --format "$f" --concurrency 1 --warmup 0 --duration "$WARMUP" --label warm-up >&2
  rec=$OUT/allocation-$f.jfr
  "$JDK_BIN/jcmd" "$SERVER_PID" JFR.start name=allocation settings=none \
    +jdk.ThreadAllocationStatistics#enabled=true +jdk.ThreadAllocationStatistics#period=1s \
    filename="$rec" > /dev/null
  sleep 1.5
  loadgen --format "$f" --concurrency 1 --warmup 0 --duration "$DURATION" --label measured \
    --json-out "$OUT/allocation-$f.jsonl" >&2
  sleep 1.5
  "$JDK_BIN/jcmd" "$SERVER_PID" JFR.stop name=allocation > /dev/null
  "$JDK_BIN/jfr" print --json --events jdk.ThreadAllocationStatistics "$rec" > "$OUT/allocation-$f.json"
  python3 - "$f" "$OUT/allocation-$f.jsonl" "$OUT/allocation-$f.json" >> "$OUT/allocation.md" << 'PY'
import collections, json, sys
fmt, run, events = sys.argv[1:]
requests = json.loads(open(run).read().splitlines()[-1])["requests"]
by_thread = collections.defaultdict(list)
for e in json.load(open(events))["recording"]["events"]:
    v = e["values"]
    t = v["thread"]
    by_thread[(t["javaName"], t["javaThreadId"]) if t else ("native", 0)].append((v["startTime"], v["allocated"]))
grown = []
for (name, _), samples in by_thread.items():
    samples.sort()
    grown.append((samples[-1][1] - samples[0][1], name))
total = sum(g for g, _ in grown)
top = ", ".join(f"{n} {g / requests:.0f}" for g, n in sorted(grown, reverse=True)[:3])
print(f"| {fmt} | {requests} | **{total / requests:.0f}** | {top} |")
PY
done
log "wrote $OUT/allocation.md"
cat "$OUT/allocation.md"
