#!/usr/bin/env bash
# Small requests as an external client sees them: wrk (the Debian package) against the packaged
# service on loopback, JSON and binary, at each concurrency, in BENCH_ROUNDS rounds, with the
# server's whole-process CPU per request from /proc/PID/stat (every thread: request threads, GC,
# JIT) and wrk's own latency percentiles. Writes target/bench/wrk.md and wrk.jsonl.
#
# Knobs (environment): BENCH_MODEL (demo-portable), BENCH_FORMATS ("json binary"),
# BENCH_CONCURRENCY ("1 2 4"), BENCH_ROUNDS (3), BENCH_DURATION (8, seconds per row),
# BENCH_WARMUP (20, seconds of unrecorded load per format first), BENCH_PORT (18080),
# BENCH_MGMT_PORT (18081), BENCH_JAR (this tree's jar, rebuilt when older than the sources),
# SERVICE_JAVA_OPTS (JVM options for the service, e.g. a GC log), BENCH_SERVICE_ARGS (more
# arguments for the service, e.g. --spring.threads.virtual.enabled=true).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${BENCH_OUT:-$ROOT/target/bench}
PORT=${BENCH_PORT:-18080}
MGMT_PORT=${BENCH_MGMT_PORT:-18081}
MODEL=${BENCH_MODEL:-demo-portable}
FORMATS=${BENCH_FORMATS:-json binary}
CONCURRENCY=${BENCH_CONCURRENCY:-1 2 4}
ROUNDS=${BENCH_ROUNDS:-3}
DURATION=${BENCH_DURATION:-8}
WARMUP=${BENCH_WARMUP:-20}

command -v wrk > /dev/null || { echo "wrk is missing (Debian: apt-get install wrk)" >&2; exit 1; }
log() { printf '[wrk %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
mkdir -p "$OUT"
[[ -n ${BENCH_JAR:-} ]] || bench_build
bench_require_free_ports "set BENCH_PORT / BENCH_MGMT_PORT" "$PORT" "$MGMT_PORT"
cp "${BENCH_JAR:-$ROOT/target/etserve-0.1.0-SNAPSHOT.jar}" "$OUT/etserve.jar"

# The first reference case as each format's body, and a wrk script that posts it. The expected
# answer is PyTorch's (reference.json, written at export time).
python3 - "$ROOT/models/$MODEL/1/reference.json" "$OUT" << 'PY'
import json, struct, sys
ref = json.load(open(sys.argv[1]))
case = ref["cases"][0]
inp, want = case["inputs"][0], case["outputs"][0]
out = sys.argv[2]
tensor = {"name": inp["name"], "shape": inp["shape"], "datatype": inp["datatype"]}
with open(f"{out}/wrk-json.body", "w") as f:
    json.dump({"inputs": [dict(tensor, data=inp["data"])]}, f)
raw = struct.pack(f"<{len(inp['data'])}f", *inp["data"])
header = json.dumps({"inputs": [dict(tensor, parameters={"binary_data_size": len(raw)})],
                     "outputs": [{"name": want["name"], "parameters": {"binary_data": True}}]}).encode()
with open(f"{out}/wrk-binary.body", "wb") as f:
    f.write(header + raw)
with open(f"{out}/wrk-binary.header-length", "w") as f:
    f.write(str(len(header)))
tol = ref["tolerance"]
json.dump({"expected": want["data"], "atol": tol["atol"], "rtol": tol["rtol"]},
          open(f"{out}/wrk-expected.json", "w"))
PY
for f in $FORMATS; do
  headers='wrk.headers["Content-Type"] = "application/json"'
  if [[ $f == binary ]]; then
    headers='wrk.headers["Content-Type"] = "application/octet-stream"
wrk.headers["Inference-Header-Content-Length"] = "'"$(cat "$OUT/wrk-binary.header-length")"'"'
  fi
  cat > "$OUT/wrk-$f.lua" << LUA
wrk.method = "POST"
$headers
local file = io.open("$OUT/wrk-$f.body", "rb")
wrk.body = file:read("*all")
file:close()
LUA
done

log "starting the service (log: $OUT/wrk-server.log)"
# shellcheck disable=SC2086  # a list of arguments
SERVICE_JAR=$OUT/etserve.jar bench_start_service "$OUT/wrk-server.log" "$ROOT/models" --etserve.grpc.port=0 \
  ${BENCH_SERVICE_ARGS:-}
trap 'kill "$SERVER_PID" 2> /dev/null || true; wait "$SERVER_PID" 2> /dev/null || true' EXIT
URL="http://127.0.0.1:$PORT/v2/models/$MODEL/infer"

# One answer checked value by value against PyTorch's per format: wrk itself checks only statuses.
for f in $FORMATS; do
  if [[ $f == json ]]; then
    curl -sf -H 'Content-Type: application/json' --data-binary "@$OUT/wrk-json.body" "$URL" > "$OUT/wrk-answer"
  else
    curl -sf -H 'Content-Type: application/octet-stream' \
      -H "Inference-Header-Content-Length: $(cat "$OUT/wrk-binary.header-length")" \
      --data-binary "@$OUT/wrk-binary.body" -D "$OUT/wrk-answer.headers" "$URL" > "$OUT/wrk-answer"
  fi
  python3 - "$f" "$OUT" << 'PY'
import json, re, struct, sys
fmt, out = sys.argv[1], sys.argv[2]
exp = json.load(open(f"{out}/wrk-expected.json"))
body = open(f"{out}/wrk-answer", "rb").read()
if fmt == "json":
    got = json.loads(body)["outputs"][0]["data"]
else:
    n = int(re.search(rb"(?i)inference-header-content-length:\s*(\d+)", open(f"{out}/wrk-answer.headers", "rb").read()).group(1))
    got = list(struct.unpack(f"<{(len(body) - n) // 4}f", body[n:]))
want = exp["expected"]
bad = [i for i, (g, w) in enumerate(zip(got, want)) if abs(g - w) > exp["atol"] + exp["rtol"] * abs(w)]
if len(got) != len(want) or bad:
    sys.exit(f"{fmt}: the answer differs from PyTorch's reference at {bad or 'its length'}")
PY
done

cpu_ticks() { awk '{print $14 + $15}' "/proc/$SERVER_PID/stat"; }
TICK=$(getconf CLK_TCK)

# wrk's latency lines ("50%   31.00us", "99%    1.20ms") in microseconds.
micros() {
  awk -v p="$1" '$1 == p {v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
    f = (u == "us") ? 1 : (u == "ms") ? 1000 : (u == "s") ? 1000000 : 0.001; printf "%.1f", v * f}'
}

for f in $FORMATS; do
  log "warm-up: $f, ${WARMUP}s at c = 2 (not recorded)"
  wrk -t1 -c2 -d"${WARMUP}s" -s "$OUT/wrk-$f.lua" "$URL" > /dev/null
done

: > "$OUT/wrk.jsonl"
for r in $(seq "$ROUNDS"); do
  for f in $FORMATS; do
    for c in $CONCURRENCY; do
      load=$(cut -d' ' -f1 /proc/loadavg)
      before=$(cpu_ticks)
      wrk -t1 -c"$c" -d"${DURATION}s" --latency -s "$OUT/wrk-$f.lua" "$URL" > "$OUT/wrk-run.txt"
      after=$(cpu_ticks)
      n=$(awk '/requests in/ {print $1}' "$OUT/wrk-run.txt")
      non2xx=$(awk '/Non-2xx/ {print $NF}' "$OUT/wrk-run.txt")
      rps=$(awk '/Requests\/sec/ {print $2}' "$OUT/wrk-run.txt")
      p50=$(micros 50% < "$OUT/wrk-run.txt")
      p99=$(micros 99% < "$OUT/wrk-run.txt")
      cpu=$(awk -v a="$before" -v b="$after" -v n="$n" -v t="$TICK" 'BEGIN {printf "%.1f", (b - a) * 1e6 / t / n}')
      printf '{"round":%d,"format":"%s","concurrency":%d,"requests":%d,"non2xx":%d,"rps":%s,"p50_us":%s,"p99_us":%s,"server_cpu_us_per_request":%s,"load":%s}\n' \
        "$r" "$f" "$c" "$n" "${non2xx:-0}" "$rps" "$p50" "$p99" "$cpu" "$load" >> "$OUT/wrk.jsonl"
      log "round $r $f c=$c: $n requests, $rps req/s, p50 $p50 us, p99 $p99 us, server CPU $cpu us/req (load $load)"
      [[ ${non2xx:-0} == 0 ]] || { echo "wrk saw $non2xx answers that were not 2xx" >&2; exit 1; }
    done
  done
done

python3 - "$OUT/wrk.jsonl" "$MODEL" > "$OUT/wrk.md" << 'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"wrk 4.x, -t1, model {sys.argv[2]}; server CPU = whole process from /proc per request; rounds separated by /")
print()
print("| format | c | server CPU us/req | p50 us | p99 us | p99/p50 | req/s | median CPU | median p99/p50 |")
print("|---|---|---|---|---|---|---|---|---|")
keys = sorted({(r["format"], r["concurrency"]) for r in rows}, key=lambda k: (k[0], k[1]))
for fmt, c in keys:
    rs = [r for r in rows if r["format"] == fmt and r["concurrency"] == c]
    j = lambda k, f="{:.1f}": " / ".join(f.format(r[k]) for r in rs)
    ratio = [r["p99_us"] / r["p50_us"] for r in rs]
    print(f"| {fmt} | {c} | {j('server_cpu_us_per_request')} | {j('p50_us')} | {j('p99_us')} | "
          f"{' / '.join(f'{x:.1f}' for x in ratio)} | {j('rps', '{:.0f}')} | "
          f"{statistics.median(r['server_cpu_us_per_request'] for r in rs):.1f} | {statistics.median(ratio):.1f} |")
PY
cat "$OUT/wrk.md"
