#!/usr/bin/env bash
# Server CPU per small request: the build before tracing, this build with tracing off, and this
# build with tracing on (ratio 1.0, spans exported to a local OTLP/HTTP sink), all three up at
# once and measured in short alternating slices, so that a machine shared with other work loads
# each of them alike. See bench/README.md ("Tracing"). Writes target/bench/tracing/.
#
#   BEFORE_JAR (required): the service jar of the commit before tracing
#   TRACING_ROUNDS (10), TRACING_SLICE (4 s measured after 1 s warm-up), BENCH_MODELS
#   ("demo-xnnpack"), BENCH_FORMATS ("json grpc"), BENCH_CONCURRENCY (1)
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/target/bench/tracing
JAR=$ROOT/target/etserve-0.1.0-SNAPSHOT.jar
ROUNDS=${TRACING_ROUNDS:-10}
SLICE=${TRACING_SLICE:-4}
MODELS=${BENCH_MODELS:-demo-xnnpack}
FORMATS=${BENCH_FORMATS:-json grpc}
CONCURRENCY=${BENCH_CONCURRENCY:-1}
SINK_PORT=${TRACING_SINK_PORT:-27318}
: "${BEFORE_JAR:?set BEFORE_JAR to the jar of the build before tracing}"
log() { printf '[tracing-cpu %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

mkdir -p "$OUT"
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
bench_build

# An OTLP/HTTP endpoint that takes every export (200) and counts them: the spans go somewhere
# real, as they would to a collector on the host.
python3 - "$SINK_PORT" "$OUT/sink.txt" <<'PY' &
import http.server, sys
port, out = int(sys.argv[1]), sys.argv[2]
total = [0, 0]
class Sink(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        total[0] += len(self.rfile.read(int(self.headers.get('Content-Length', 0))))
        total[1] += 1
        self.send_response(200); self.send_header('Content-Length', '0'); self.end_headers()
        open(out, 'w').write(f"{total[1]} exports, {total[0]} bytes\n")
    def log_message(self, *a): pass
http.server.HTTPServer(('127.0.0.1', port), Sink).serve_forever()
PY
PIDS=($!)
trap 'kill "${PIDS[@]}" 2>/dev/null || true' EXIT

# name http-port jar extra-args...: each service from its own copy of its jar.
declare -A HTTP GRPC SPID
start() {
  local name=$1 port=$2 jar=$3
  shift 3
  mkdir -p "$OUT/$name"
  cp "$jar" "$OUT/$name/etserve.jar"
  log "starting $name on 127.0.0.1:$port"
  OUT=$OUT/$name PORT=$port MGMT_PORT=$((port + 1)) bench_start_service "$OUT/$name/server.log" "$ROOT/models" \
    --etserve.grpc.port=$((port + 2)) "$@"
  HTTP[$name]=$port GRPC[$name]=$((port + 2)) SPID[$name]=$SERVER_PID
  PIDS+=("$SERVER_PID")
}
for p in 27180 27280 27380; do bench_require_free_ports "free 27180-27382" $p $((p + 1)) $((p + 2)); done
start before 27180 "$BEFORE_JAR"
start off 27280 "$JAR"
start on 27380 "$JAR" --etserve.tracing.enabled=true --management.tracing.sampling.probability=1.0 \
  --management.opentelemetry.tracing.export.otlp.endpoint="http://127.0.0.1:$SINK_PORT/v1/traces"

loadgen() {
  local name=$1
  shift
  java -XX:+UseSerialGC -Xmx256m -cp "$CP" io.etserve.bench.LoadGenerator --url "http://127.0.0.1:${HTTP[$name]}" \
    --grpc-port "${GRPC[$name]}" --server-pid "${SPID[$name]}" "$@"
}
log "JIT warm-up, 10 s per service, model and format (not recorded)"
for name in before off on; do
  for m in $MODELS; do
    for f in $FORMATS; do
      loadgen "$name" --model "$m" --format "$f" --concurrency 2 --warmup 0 --duration 10 --label jit-warmup >&2
    done
  done
done

: > "$OUT/slices.jsonl"
for round in $(seq "$ROUNDS"); do
  log "round $round of $ROUNDS"
  for m in $MODELS; do
    for f in $FORMATS; do
      for name in before off on; do
        loadgen "$name" --model "$m" --format "$f" --concurrency "$CONCURRENCY" --warmup 1 --duration "$SLICE" \
          --json-out "$OUT/slices.jsonl" --label "$name" >&2
      done
    done
  done
done
cat "$OUT/sink.txt" >&2
python3 "$ROOT/bench/tracing-summary.py" "$OUT/slices.jsonl" | tee "$OUT/summary.md"
