#!/usr/bin/env bash
# Small requests as an external client sees them: wrk (the Debian package) against the packaged
# service on loopback, JSON and binary, at each concurrency, in BENCH_ROUNDS rounds, with the
# server's whole-process CPU per request from /proc/PID/stat (every thread: request threads, GC,
# JIT) and wrk's own latency percentiles. Writes target/bench/wrk.md and wrk.jsonl.
# The format `grpc` sends the same tensor as a gRPC ModelInfer (raw_input_contents, as Triton's
# clients do) with h2load (Debian: nghttp2-client), one HTTP/2 connection per client, one call in
# flight on each; percentiles from h2load's per-request log, corrected as wrk corrects its own.
#
# Knobs (environment): BENCH_MODEL (demo-portable), BENCH_FORMATS ("json binary", add grpc),
# BENCH_CONCURRENCY ("1 2 4"), BENCH_ROUNDS (3), BENCH_DURATION (8, seconds per row),
# BENCH_WARMUP (20, seconds of unrecorded load per format first, spread over the concurrencies),
# BENCH_PORT (18080), BENCH_MGMT_PORT (18081), BENCH_REPOSITORY (the model repository: models/), BENCH_JAR (this tree's jar, rebuilt when older
# than the sources), SERVICE_JAVA_OPTS (JVM options for the service, e.g. a GC log), BENCH_SERVICE_ARGS (more
# arguments for the service, e.g. --spring.threads.virtual.enabled=true), BENCH_SERVER_CPUS and
# BENCH_CLIENT_CPUS (taskset -c lists for the service and the client: at one connection, whether
# the two share a CPU decides much of the cost on a VM whose idle CPUs halt,
# bench/results/2026-12-05-2core-allocation-and-placement.md).
# BENCH_PROFILE=1: async-profiler samples the service's CPU during each of its recorded rows
# (BENCH_PROFILE_INTERVAL, 500us of CPU time per sample), and target/bench/wrk-profile.md says per
# row where a request's microseconds went (bench/profile-summary.py: by thread family, and in the
# serving threads the forward call, the kernel's calls, each library's code); those rows' CPU
# includes the profiler's own.
# BENCH_PEERS ("", or e.g. "mlserver kserve kserve:2"): Python serving peers (bench/peers/peers.sh:
# MLServer 1.7.1, KServe 0.21.0, at their defaults or with NAME:N workers, the same .pte through
# ExecuTorch's Python runtime) measured beside the service with the same clients, in JSON and,
# when BENCH_FORMATS has it, gRPC, in the same rounds (each round runs every server in turn);
# their CPU and memory are their whole process group's.
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
CLIENT_PIN=()
[[ -z ${BENCH_CLIENT_CPUS:-} ]] || CLIENT_PIN=(taskset -c "$BENCH_CLIENT_CPUS")
if [[ " $FORMATS " == *" grpc "* ]]; then
  command -v h2load > /dev/null || { echo "h2load is missing (Debian: apt-get install nghttp2-client)" >&2; exit 1; }
fi
GRPC_PORT=${BENCH_GRPC_PORT:-18001}
PEERS=${BENCH_PEERS:-}
PEER_NAMES=()
PEER_PORT=${BENCH_PEER_PORT:-18090}  # each peer takes three ports from here on
log() { printf '[wrk %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
mkdir -p "$OUT"
JAR=${BENCH_JAR:-$ROOT/target/etserve-0.1.0-SNAPSHOT.jar}
[[ -n ${BENCH_JAR:-} ]] || bench_build
bench_require_free_ports "set BENCH_PORT / BENCH_MGMT_PORT / BENCH_GRPC_PORT" "$PORT" "$MGMT_PORT" "$GRPC_PORT"
if [[ -n $PEERS ]]; then
  # shellcheck source=bench/peers/peers.sh
  source "$ROOT/bench/peers/peers.sh"
  read -r -a PEER_NAMES <<< "$PEERS"
  bench_require_free_ports "set BENCH_PEER_PORT" $(seq "$PEER_PORT" $((PEER_PORT + 3 * ${#PEER_NAMES[@]} - 1)))
fi
cp "$JAR" "$OUT/etserve.jar"

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
# gRPC: a ModelInferRequest (model_name = 1, inputs = 5 {name 1, datatype 2, packed shape 3},
# raw_input_contents = 7) in its length-prefixed frame, written field by field.
def varint(n):
    b = bytearray()
    while True:
        b.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(b)
def field(num, payload):
    return varint(num << 3 | 2) + varint(len(payload)) + payload
model = sys.argv[1].split("/")[-3].encode()
shape = b"".join(varint(d) for d in inp["shape"])
tensor_msg = field(1, inp["name"].encode()) + field(2, inp["datatype"].encode()) + field(3, shape)
message = field(1, model) + field(5, tensor_msg) + field(7, raw)
with open(f"{out}/wrk-grpc.body", "wb") as f:
    f.write(b"\0" + struct.pack(">I", len(message)) + message)
tol = ref["tolerance"]
json.dump({"expected": want["data"], "atol": tol["atol"], "rtol": tol["rtol"]},
          open(f"{out}/wrk-expected.json", "w"))
PY
# The formats each server is measured in: the service all of FORMATS, the peers JSON and, when
# FORMATS has it, gRPC (the binary extension is the service's and Triton's only); not KServe with
# several workers over gRPC, whose workers die and restart under gRPC load
# (bench/results/2026-12-07-2core-wrk-peers.md).
server_formats() {
  if [[ $1 == etserve ]]; then
    printf '%s\n' $FORMATS
  else
    echo json
    [[ " $FORMATS " != *" grpc "* || $1 == kserve:* ]] || echo grpc
  fi
}

# A wrk script for every HTTP format any server is measured in.
for f in $(for server in etserve "${PEER_NAMES[@]}"; do server_formats "$server"; done | sort -u); do
  [[ $f != grpc ]] || continue
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

PROFILE_INTERVAL=${BENCH_PROFILE_INTERVAL:-500us}
PROFILES=()  # label, collapsed stacks, requests: one triple per profiled row (rounds pooled by label)
if [[ ${BENCH_PROFILE:-0} == 1 ]]; then
  bench_async_profiler
  SERVICE_JAVA_OPTS="${SERVICE_JAVA_OPTS:-} -XX:+EnableDynamicAgentLoading"
fi
log "starting the service (log: $OUT/wrk-server.log)"
# shellcheck disable=SC2086  # a list of arguments
SERVICE_JAR=$OUT/etserve.jar bench_start_service "$OUT/wrk-server.log" "${BENCH_REPOSITORY:-$ROOT/models}" --etserve.grpc.port="$GRPC_PORT" \
  ${BENCH_SERVICE_ARGS:-}
declare -A PEER_PIDS=()
stop_all() {
  kill "$SERVER_PID" 2> /dev/null || true
  wait "$SERVER_PID" 2> /dev/null || true
  local p
  for p in "${PEER_PIDS[@]}"; do peer_stop "$p"; done
}
trap stop_all EXIT
# Each server's REST and gRPC addresses (the peers' are added as they start).
declare -A URLS=([etserve]="http://127.0.0.1:$PORT/v2/models/$MODEL/infer")
declare -A GRPC_URLS=([etserve]="http://127.0.0.1:$GRPC_PORT/inference.GRPCInferenceService/ModelInfer")
# h2load's arguments for one gRPC run against server $1 (then: -c, -D or -n, more options).
grpc_load() {
  local server="$1"
  shift
  "${CLIENT_PIN[@]}" h2load -t1 -m1 -d "$OUT/wrk-grpc.body" -H 'content-type: application/grpc' -H 'te: trailers' "$@" \
    "${GRPC_URLS[$server]}"
}

# One answer of format $1 from server $2 checked value by value against PyTorch's: wrk itself
# checks only statuses.
check_answer() {
  local f="$1" url="${URLS[$2]}"
  if [[ $f == json ]]; then
    curl -sf -H 'Content-Type: application/json' --data-binary "@$OUT/wrk-json.body" "$url" > "$OUT/wrk-answer"
  elif [[ $f == grpc ]]; then
    curl -sf --http2-prior-knowledge -H 'content-type: application/grpc' -H 'te: trailers' \
      --data-binary "@$OUT/wrk-grpc.body" "${GRPC_URLS[$2]}" > "$OUT/wrk-answer"
    # What a whole answer of this server brings (timed_run counts answers without it as failures).
    stat -c %s "$OUT/wrk-answer" > "$OUT/wrk-grpc-${2/:/-}.answer-bytes"
  else
    curl -sf -H 'Content-Type: application/octet-stream' \
      -H "Inference-Header-Content-Length: $(cat "$OUT/wrk-binary.header-length")" \
      --data-binary "@$OUT/wrk-binary.body" -D "$OUT/wrk-answer.headers" "$url" > "$OUT/wrk-answer"
  fi
  python3 - "$f" "$OUT" << 'PY'
import json, re, struct, sys
fmt, out = sys.argv[1], sys.argv[2]
exp = json.load(open(f"{out}/wrk-expected.json"))
body = open(f"{out}/wrk-answer", "rb").read()
def varint(b, i):
    n = shift = 0
    while True:
        n |= (b[i] & 0x7F) << shift
        i += 1
        if b[i - 1] < 0x80:
            return n, i
        shift += 7
if fmt == "json":
    got = json.loads(body)["outputs"][0]["data"]
elif fmt == "grpc":
    # The frame's ModelInferResponse: the floats are the first raw_output_contents (field 6), as
    # the service and MLServer answer raw inputs, or else the first output's (field 5)
    # contents (5) as fp32_contents (6), as KServe answers.
    def fields(msg):
        i = 0
        while i < len(msg):
            key, i = varint(msg, i)
            if key & 7 == 2:
                n, i = varint(msg, i)
                yield key >> 3, msg[i:i + n]
                i += n
            elif key & 7 == 0:
                _, i = varint(msg, i)
            else:
                sys.exit(f"grpc: unexpected wire type in the answer: {key & 7}")
    def first(msg, number):
        return next((v for k, v in fields(msg) if k == number), None)
    response = body[5:5 + int.from_bytes(body[1:5], "big")]
    floats = first(response, 6)
    if floats is None:
        output = first(response, 5)
        contents = first(output, 5) if output is not None else None
        floats = first(contents, 6) if contents is not None else b""
    got = list(struct.unpack(f"<{len(floats) // 4}f", floats))
else:
    n = int(re.search(rb"(?i)inference-header-content-length:\s*(\d+)", open(f"{out}/wrk-answer.headers", "rb").read()).group(1))
    got = list(struct.unpack(f"<{(len(body) - n) // 4}f", body[n:]))
want = exp["expected"]
bad = [i for i, (g, w) in enumerate(zip(got, want)) if abs(g - w) > exp["atol"] + exp["rtol"] * abs(w)]
if len(got) != len(want) or bad:
    sys.exit(f"{fmt}: the answer differs from PyTorch's reference at {bad or 'its length'}")
PY
}
for f in $FORMATS; do
  check_answer "$f" etserve
done

# The peers, each started and its answers checked like the service's.
for i in "${!PEER_NAMES[@]}"; do
  name=${PEER_NAMES[$i]}
  log "starting $name (log: $OUT/wrk-${name/:/-}.log)"
  peer_start "$name" "$MODEL" $((PEER_PORT + 3 * i)) $((PEER_PORT + 3 * i + 1)) "$OUT/wrk-${name/:/-}.log"
  PEER_PIDS[$name]=$PEER_PID
  URLS[$name]="http://127.0.0.1:$((PEER_PORT + 3 * i))/v2/models/$MODEL/infer"
  GRPC_URLS[$name]="http://127.0.0.1:$((PEER_PORT + 3 * i + 1))/inference.GRPCInferenceService/ModelInfer"
  for f in $(server_formats "$name"); do
    check_answer "$f" "$name"
  done
done
SERVERS=(etserve "${PEER_NAMES[@]}")

# The processes of server $1: the service's one, or a peer's whole process group, each as its
# pid, utime and stime (from /proc/PID/stat; fields counted after the command's name, which may
# hold spaces: the group is the 3rd, utime and stime the 12th and 13th).
server_procs() {
  if [[ $1 == etserve ]]; then
    cat "/proc/$SERVER_PID/stat"
  else
    cat /proc/[0-9]*/stat 2> /dev/null
  fi | awk -v g="${PEER_PIDS[$1]:-}" '{ split(substr($0, index($0, ") ") + 2), f, " ")
    if (g == "" || f[3] == g) print $1, f[12], f[13] }'
}
cpu_ticks() { server_procs "$1" | awk '{ticks += $2 + $3} END {print ticks + 0}'; }
# Memory of server $1 in MB as it would be on a host of its own: the resident set of its largest
# process plus the private pages of the others (a peer's worker maps the same libraries as its
# server; PSS would instead split pages shared with the other servers running beside it).
memory_mb() {
  server_procs "$1" | while read -r pid _; do
    awk '/^Rss:/ {rss = $2} /^Private_(Clean|Dirty):/ {own += $2} END {if (rss) print rss, own}' \
      "/proc/$pid/smaps_rollup" 2> /dev/null || true
  done | sort -n | awk '{total += $2; rss = $1; own = $2} END {printf "%.0f", (total - own + rss) / 1024}'
}
# The service's CPU ticks by the JVM's own thread families: "gc jit" (G1's and the VM thread's,
# the compilers'); what allocation costs in collection shows in the first. "0 0" for a peer.
jvm_ticks() {
  [[ $1 == etserve ]] || { echo 0 0; return; }
  cat /proc/"$SERVER_PID"/task/*/stat 2> /dev/null | awk '{
    name = substr($0, index($0, "(") + 1); name = substr(name, 1, index(name, ")") - 1)
    split(substr($0, index($0, ") ") + 2), f, " "); ticks = f[12] + f[13]
    if (name ~ /^(GC Thread|G1|VM Thread)/) gc += ticks; else if (name ~ /^C[12] Compiler/) jit += ticks
  } END { print gc + 0, jit + 0 }'
}
TICK=$(getconf CLK_TCK)

# wrk's latency lines ("50%   31.00us", "99%    1.20ms") in microseconds.
micros() {
  awk -v p="$1" '$1 == p {v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
    f = (u == "us") ? 1 : (u == "ms") ? 1000 : (u == "s") ? 1000000 : 0.001; printf "%.1f", v * f}'
}

# The warm-up is spread over every concurrency measured (at least 5 s each): the paths a request
# takes differ with the connections (on the selector or a request thread), and a level first met
# in a timed round would be compiled during it.
read -r -a LEVELS <<< "$CONCURRENCY"
WARMUP_EACH=$(( WARMUP / ${#LEVELS[@]} > 5 ? WARMUP / ${#LEVELS[@]} : 5 ))
for server in "${SERVERS[@]}"; do
  for f in $(server_formats "$server"); do
    for c in "${LEVELS[@]}"; do
      log "warm-up: $server $f, ${WARMUP_EACH}s at c = $c (not recorded)"
      if [[ $f == grpc ]]; then
        grpc_load "$server" -c"$c" -D "$WARMUP_EACH" > /dev/null
      else
        "${CLIENT_PIN[@]}" wrk -t1 -c"$c" -d"${WARMUP_EACH}s" -s "$OUT/wrk-$f.lua" "${URLS[$server]}" > /dev/null
      fi
    done
  done
done

# One timed run of format $1 at concurrency $2 against server $3 into $OUT/wrk-run.txt, in wrk's
# terms ("N requests in", "Requests/sec:", "50%"/"99%" latency lines, "Non-2xx" when any failed).
timed_run() {
  if [[ $1 != grpc ]]; then
    "${CLIENT_PIN[@]}" wrk -t1 -c"$2" -d"${DURATION}s" --latency -s "$OUT/wrk-$1.lua" "${URLS[$3]}" > "$OUT/wrk-run.txt"
    return
  fi
  # A failed call is HTTP 200 with a non-zero grpc-status and no message: count the answers
  # that came without their message's bytes as failures.
  : > "$OUT/wrk-grpc.log"  # h2load appends
  grpc_load "$3" -c"$2" -D "$DURATION" --log-file="$OUT/wrk-grpc.log" > "$OUT/wrk-h2load.txt"
  python3 - "$OUT/wrk-h2load.txt" "$OUT/wrk-grpc.log" "$DURATION" "$(cat "$OUT/wrk-grpc-${3/:/-}.answer-bytes")" "$2" \
    > "$OUT/wrk-run.txt" << 'PY'
import re, statistics, sys
text = open(sys.argv[1]).read()
done = int(re.search(r"requests: \d+ total, \d+ started, (\d+) done", text).group(1))
data = re.search(r"\((\d+)\) data", text)
lat = [int(l.split()[2]) for l in open(sys.argv[2]) if l.strip()]
# wrk's percentiles are corrected for coordinated omission (stats_correct: a request that took
# n >= 2 x the mean interval between a connection's requests also counts as n - interval,
# n - 2 x interval, ... down to the interval, the requests a stall held back); the same here, so
# gRPC's percentiles read as REST's. The log's own percentiles: wrk-grpc.log.
interval = float(sys.argv[3]) * 1e6 / (len(lat) / int(sys.argv[5]))
held = []
for n in lat:
    m = n - interval
    while n >= 2 * interval and m > interval:
        held.append(m)
        m -= interval
lat = sorted(lat + held)
q = lambda p: int(lat[min(len(lat) - 1, int(p * len(lat)))])
short = done - int(data.group(1)) // int(sys.argv[4]) if data else 0
print(f"  {done} requests in {sys.argv[3]}s")
print(f"Requests/sec: {done / float(sys.argv[3]):.2f}")
print(f"     50%   {q(0.50)}us")
print(f"     99%   {q(0.99)}us")
if short > 0:
    print(f"Non-2xx or socket errors: {short}")
PY
}

: > "$OUT/wrk.jsonl"
for r in $(seq "$ROUNDS"); do
  for server in "${SERVERS[@]}"; do
    for f in $(server_formats "$server"); do
      for c in $CONCURRENCY; do
        load=$(cut -d' ' -f1 /proc/loadavg)
        read -r gc_before jit_before <<< "$(jvm_ticks "$server")"
        profiled=
        [[ ${BENCH_PROFILE:-0} != 1 || $server != etserve ]] || profiled=$OUT/wrk-profile-$f-c$c-r$r.collapsed
        [[ -z $profiled ]] || bench_profiler "start,event=cpu,interval=$PROFILE_INTERVAL,threads"
        before=$(cpu_ticks "$server")
        timed_run "$f" "$c" "$server"
        after=$(cpu_ticks "$server")
        [[ -z $profiled ]] || bench_profiler "stop,file=$profiled,collapsed"
        read -r gc_after jit_after <<< "$(jvm_ticks "$server")"
        n=$(awk '/requests in/ {print $1}' "$OUT/wrk-run.txt")
        non2xx=$(awk '/Non-2xx/ {print $NF}' "$OUT/wrk-run.txt")
        rps=$(awk '/Requests\/sec/ {print $2}' "$OUT/wrk-run.txt")
        p50=$(micros 50% < "$OUT/wrk-run.txt")
        p99=$(micros 99% < "$OUT/wrk-run.txt")
        per_request() { awk -v a="$1" -v b="$2" -v n="$n" -v t="$TICK" 'BEGIN {printf "%.2f", (b - a) * 1e6 / t / n}'; }
        cpu=$(per_request "$before" "$after")
        gc=$(per_request "$gc_before" "$gc_after")
        jit=$(per_request "$jit_before" "$jit_after")
        memory=$(memory_mb "$server")
        printf '{"round":%d,"server":"%s","format":"%s","concurrency":%d,"requests":%d,"non2xx":%d,"rps":%s,"p50_us":%s,"p99_us":%s,"server_cpu_us_per_request":%s,"gc_us_per_request":%s,"jit_us_per_request":%s,"memory_mb":%s,"load":%s}\n' \
          "$r" "$server" "$f" "$c" "$n" "${non2xx:-0}" "$rps" "$p50" "$p99" "$cpu" "$gc" "$jit" "$memory" "$load" >> "$OUT/wrk.jsonl"
        log "round $r $server $f c=$c: $n requests, $rps req/s, p50 $p50 us, p99 $p99 us, server CPU $cpu us/req (GC $gc, JIT $jit; memory $memory MB; load $load)"
        [[ ${non2xx:-0} == 0 ]] || { echo "wrk saw $non2xx answers that were not 2xx from $server" >&2; exit 1; }
        [[ -z $profiled ]] || PROFILES+=("$f c=$c" "$profiled" "$n")
      done
    done
  done
done

# The service's I/O threads, as its log says them (a selector and a gRPC loop per core by default),
# and whether a lone connection's REST calls run on its selector (on by default).
io_threads=$(grep -oE "[0-9]+ (selectors|event loops)|inline-alone-below ([0-9]+(us|ms)|off)" "$OUT/wrk-server.log" \
  | paste -sd, - | sed 's/,/, /g')
python3 - "$OUT/wrk.jsonl" "$MODEL" \
  "service on CPUs ${BENCH_SERVER_CPUS:-any} (${io_threads:-I/O threads not logged}), client on ${BENCH_CLIENT_CPUS:-any}" \
  > "$OUT/wrk.md" << 'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
servers = list(dict.fromkeys(r["server"] for r in rows))  # the service first, then the peers
print(f"wrk 4.x, -t1 (grpc: h2load -t1 -m1), model {sys.argv[2]}; server CPU = whole process (a peer: its process group) from /proc per request; memory at the row's end (the largest process's resident set, the others' private pages); rounds separated by /; {sys.argv[3]}")
print()
print("| server | format | c | server CPU us/req | of which GC | of which JIT | p50 us | p99 us | p99/p50 | req/s | memory MB | median CPU | median p99/p50 |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
keys = sorted({(r["format"], r["concurrency"], r["server"]) for r in rows},
              key=lambda k: (k[0], k[1], servers.index(k[2])))
median = lambda rs, k: statistics.median(r[k] for r in rs)
for fmt, c, server in keys:
    rs = [r for r in rows if (r["format"], r["concurrency"], r["server"]) == (fmt, c, server)]
    j = lambda k, f="{:.1f}": " / ".join(f.format(r[k]) for r in rs)
    ratio = [r["p99_us"] / r["p50_us"] for r in rs]
    print(f"| {server} | {fmt} | {c} | {j('server_cpu_us_per_request')} | {j('gc_us_per_request', '{:.2f}')} | "
          f"{j('jit_us_per_request', '{:.2f}')} | {j('p50_us')} | {j('p99_us')} | "
          f"{' / '.join(f'{x:.1f}' for x in ratio)} | {j('rps', '{:.0f}')} | {j('memory_mb', '{:.0f}')} | "
          f"{median(rs, 'server_cpu_us_per_request'):.1f} | {statistics.median(ratio):.1f} |")
# Against the peers, per format all serve (JSON; gRPC when measured): medians' ratios, and in
# how many rounds the service's p99 was below every peer's.
peers = servers[1:]
for fmt in ("json", "grpc"):
    levels = sorted({r["concurrency"] for r in rows if r["format"] == fmt and r["server"] == servers[0]})
    if not peers or not levels or not any(r["format"] == fmt and r["server"] in peers for r in rows):
        continue
    print()
    print(f"| {fmt}, c | req/s, service / best peer | CPU per request, service / best peer | memory, service / smallest peer | rounds with the service's p99 below every peer's |")
    print("|---|---|---|---|---|")
    for c in levels:
        of = lambda s: [r for r in rows if (r["format"], r["concurrency"], r["server"]) == (fmt, c, s)]
        own = of(servers[0])
        rps = max(median(of(p), "rps") for p in peers)
        cpu = min(median(of(p), "server_cpu_us_per_request") for p in peers)
        memory = min(median(of(p), "memory_mb") for p in peers)
        below = sum(all(r["p99_us"] < q["p99_us"] for p in peers for q in of(p) if q["round"] == r["round"]) for r in own)
        print(f"| {c} | {median(own, 'rps') / rps:.2f} | {median(own, 'server_cpu_us_per_request') / cpu:.2f} | "
              f"{median(own, 'memory_mb') / memory:.2f} | {below} of {len(own)} |")
PY
cat "$OUT/wrk.md"
if (( ${#PROFILES[@]} )); then
  { echo; echo "Where the service's CPU per request went (async-profiler, cpu, one sample per $PROFILE_INTERVAL of CPU; collapsed stacks: $OUT/wrk-profile-*.collapsed):"; echo
    python3 "$ROOT/bench/profile-summary.py" "$PROFILE_INTERVAL" "${PROFILES[@]}"; } | tee "$OUT/wrk-profile.md"
fi
