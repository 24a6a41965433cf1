#!/usr/bin/env bash
# Server CPU per small request with tracing off and on, against the build before tracing, in one
# run (bench/run-cpu.sh's REST half, alternating the three services each round). See
# bench/README.md ("Tracing"). Everything goes to target/bench/tracing/.
#
#   BEFORE_JAR (required): the service jar built from the commit before tracing
#   TRACING_ROUNDS (2); run-cpu.sh's knobs (BENCH_MODELS, BENCH_FORMATS, ...) pass through
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/target/bench/tracing
SINK_PORT=${TRACING_SINK_PORT:-14318}
: "${BEFORE_JAR:?set BEFORE_JAR to the jar of the build before tracing}"
mkdir -p "$OUT"

# An OTLP/HTTP endpoint that takes every export (200) and counts the bytes: spans must go
# somewhere real, as they would to a collector on the host.
python3 - "$SINK_PORT" "$OUT/sink-bytes.txt" <<'PY' &
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
SINK_PID=$!
trap 'kill $SINK_PID 2>/dev/null || true' EXIT

ON="--etserve.tracing.enabled=true --management.tracing.sampling.probability=1.0"
ON+=" --management.opentelemetry.tracing.export.otlp.endpoint=http://127.0.0.1:$SINK_PORT/v1/traces"
for round in $(seq "${TRACING_ROUNDS:-2}"); do
  for label in before off on; do
    jar="" args=""
    case $label in
      before) jar=$BEFORE_JAR ;;
      on) args=$ON ;;
    esac
    echo "[tracing-cpu] round $round: $label" >&2
    BENCH_SKIP_JMH=1 BENCH_JAR=$jar BENCH_SERVICE_ARGS=$args bash bench/run-cpu.sh > "$OUT/$label-$round.md"
    cp target/bench/rest.jsonl "$OUT/$label-$round.jsonl"
  done
done
cat "$OUT/sink-bytes.txt" >&2
