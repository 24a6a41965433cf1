#!/usr/bin/env bash
# Server CPU per small request before and after Triton's statistics extension, in one run: the
# baseline (BENCH_BASELINE, default main: the code this branch starts from) built from
# `git archive` with this tree's native libraries, and this tree, each measured by run-cpu.sh's
# REST/gRPC half (BENCH_SKIP_JMH=1), alternated over BENCH_ROUNDS (2) rounds so that a change in
# the machine's load falls on both. Prints one table: server CPU us/request per model, format and
# concurrency, each build's rounds side by side. Everything goes to target/bench-statistics/.
# The other knobs are run-cpu.sh's (BENCH_MODELS, BENCH_FORMATS, BENCH_CONCURRENCY,
# BENCH_WARMUP, BENCH_DURATION, ports).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/target/bench-statistics
BASELINE=${BENCH_BASELINE:-main}
ROUNDS=${BENCH_ROUNDS:-2}
JAR=$ROOT/target/etserve-0.1.0-SNAPSHOT.jar

log() { printf '[cpu-statistics %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
mkdir -p "$OUT"
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
bench_build

bench_baseline_jar "$BASELINE" "$OUT/etserve-baseline.jar"
cp "$JAR" "$OUT/etserve-current.jar"

for r in $(seq "$ROUNDS"); do
  for build in baseline current; do
    log "round $r: $build"
    BENCH_SKIP_JMH=1 BENCH_JAR="$OUT/etserve-$build.jar" BENCH_OUT="$OUT/$build-$r" bash bench/run-cpu.sh > /dev/null
  done
done

{
  echo "host: $(nproc) CPUs, load after the run: $(cut -d' ' -f1-3 /proc/loadavg); current: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (+ changes)'), baseline: $BASELINE ($BASE_COMMIT)"
  python3 - "$OUT" "$ROUNDS" <<'PY'
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
rows = {}
for build in ("baseline", "current"):
    for r in range(1, rounds + 1):
        for line in open(f"{out}/{build}-{r}/rest.jsonl"):
            j = json.loads(line)
            key = (j["model"], j["format"], j["concurrency"])
            rows.setdefault(key, {}).setdefault(build, []).append((j.get("server_cpu_us_per_request"), j["throughput_rps"]))
print("| model | format | c | baseline server CPU us/req (per round) | current server CPU us/req (per round) | baseline req/s | current req/s |")
print("|---|---|---|---|---|---|---|")
for (m, f, c), b in sorted(rows.items()):
    cpu = lambda s: " / ".join(f"{x[0]:.1f}" for x in b.get(s, []))
    rps = lambda s: " / ".join(f"{x[1]:.0f}" for x in b.get(s, []))
    print(f"| {m} | {f} | {c} | {cpu('baseline')} | {cpu('current')} | {rps('baseline')} | {rps('current')} |")
PY
} | tee "$OUT/summary.md"
