#!/usr/bin/env bash
# Triton's perf_analyzer (PyPI perf-analyzer, pinned) against the service, with no proxy, over
# HTTP (binary tensor data, its default, and JSON) and gRPC (PA_MODES may add grpc-streaming:
# ModelStreamInfer, perf_analyzer's --streaming; http-shm and grpc-shm: its
# --shared-memory=system, the tensors in /dev/shm regions it registers) at concurrency 1..4 on the demo
# models, beside the project's LoadGenerator on the same service. perf_analyzer reads the model's
# metadata and configuration before it starts and the statistics extension around each window
# (its server-side columns). Prints one table; everything goes to target/perf-analyzer/.
#
# perf-analyzer 2.60.0 is one manylinux_2_38 wheel (the C++ binary inside, no Python needed):
# it runs where glibc >= 2.38 (the GPU host's Ubuntu 24.04, Debian trixie). On an older host
# (Debian 12: 2.36) it runs in a chroot of a glibc >= 2.38 root filesystem (root needed):
# PA_ROOTFS, or the project's own Debian trixie base image tarball when .ci/base-images.sh has
# made one (.cache/base-images/runtime-cpu-trixie-*.tar), extracted once. The chroot shares the
# host's network, so it reaches the service on 127.0.0.1.
#
# perf_analyzer loads the CUDA runtime for any shared memory, system shared memory too: for the
# shm modes in a chroot without one, libcudart.so.12 from the pinned nvidia-cuda-runtime-cu12
# wheel is put in the chroot. The service is started with etserve.shared-memory.enabled.
#
# Knobs: PA_VERSION (2.60.0), PA_MODELS ("demo-portable demo-xnnpack"), PA_MODES
# ("http-binary http-json grpc"), PA_CONCURRENCY ("1:4"), PA_INTERVAL_MS (3000), PA_STABILITY
# (perf_analyzer's -s, 10 %: raise it on a loaded machine, where windows differ more),
# PA_MAX_TRIALS (10), PA_ROOTFS,
# BENCH_DURATION (10) and BENCH_WARMUP (3) for LoadGenerator, BENCH_PORT (18480),
# BENCH_MGMT_PORT (18481), BENCH_GRPC_PORT (18401).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/target/perf-analyzer
PA_VERSION=${PA_VERSION:-2.60.0}
MODELS=${PA_MODELS:-demo-portable demo-xnnpack}
MODES=${PA_MODES:-http-binary http-json grpc}
RANGE=${PA_CONCURRENCY:-1:4}
INTERVAL=${PA_INTERVAL_MS:-3000}
STABILITY=${PA_STABILITY:-10}
TRIALS=${PA_MAX_TRIALS:-10}
DURATION=${BENCH_DURATION:-10}
WARMUP=${BENCH_WARMUP:-3}
PORT=${BENCH_PORT:-18480}
MGMT_PORT=${BENCH_MGMT_PORT:-18481}
GRPC_PORT=${BENCH_GRPC_PORT:-18401}
JAR=$ROOT/target/etserve-0.1.0-SNAPSHOT.jar

log() { printf '[perf-analyzer %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
mkdir -p "$OUT"
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
bench_build
bench_require_free_ports "set BENCH_PORT / BENCH_MGMT_PORT / BENCH_GRPC_PORT" "$PORT" "$MGMT_PORT" "$GRPC_PORT"

# --- perf_analyzer ----------------------------------------------------------------------------
bench_perf_analyzer "$PA_VERSION"
RUN=("${PA_RUN[@]}")
rootfs=$PA_CHROOT
unmount_chroot() { [[ -z ${rootfs:-} ]] || { umount "$rootfs/proc" "$rootfs/dev/shm" 2>/dev/null || true; }; }
trap unmount_chroot EXIT
sha256sum "$PA_WHEEL_DIR"/perf_analyzer-*.whl > "$OUT/wheel.sha256"
if [[ $MODES == *-shm* && -n $rootfs && ! -e $rootfs/usr/lib/x86_64-linux-gnu/libcudart.so ]]; then
  cudart=$OUT/cudart-12.9.79
  if [[ ! -f $cudart/nvidia/cuda_runtime/lib/libcudart.so.12 ]]; then
    log "fetching nvidia-cuda-runtime-cu12==12.9.79 (perf_analyzer's shared memory loads the CUDA runtime)"
    rm -rf "$cudart" && mkdir -p "$cudart"
    python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
      --platform manylinux2014_x86_64 -d "$cudart" "nvidia-cuda-runtime-cu12==12.9.79"
    (cd "$cudart" && python3 -m zipfile -e nvidia_cuda_runtime_cu12-*.whl .)
  fi
  cp "$cudart/nvidia/cuda_runtime/lib/libcudart.so.12" "$rootfs/usr/lib/x86_64-linux-gnu/libcudart.so"
fi

# --- the service ------------------------------------------------------------------------------
cp "$JAR" "$OUT/etserve.jar"
"$SERVER_JAVA" --enable-native-access=ALL-UNNAMED -jar "$OUT/etserve.jar" \
  --server.address=127.0.0.1 --server.port="$PORT" --etserve.grpc.address=127.0.0.1 \
  --etserve.grpc.port="$GRPC_PORT" --management.server.address=127.0.0.1 \
  --management.server.port="$MGMT_PORT" --etserve.model-repository="$ROOT/models" \
  --etserve.shared-memory.enabled=true > "$OUT/server.log" 2>&1 &
SERVER_PID=$!
trap 'kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; unmount_chroot' EXIT
for _ in $(seq 120); do
  kill -0 "$SERVER_PID" 2>/dev/null || { tail -40 "$OUT/server.log" >&2; exit 1; }
  curl -sf -o /dev/null "http://127.0.0.1:$PORT/v2/health/ready" && break
  sleep 1
done

: > "$OUT/loadgen.jsonl"
lo=${RANGE%%:*}
hi=${RANGE##*:}
for m in $MODELS; do
  for mode in $MODES; do
    args=(-m "$m" --concurrency-range "$RANGE" --measurement-interval "$INTERVAL" -s "$STABILITY" -r "$TRIALS"
      -f "/tmp/pa-$m-$mode.csv")
    case $mode in
      http-binary) args+=(-i http -u "127.0.0.1:$PORT") ;;
      http-json) args+=(-i http -u "127.0.0.1:$PORT" --input-tensor-format json --output-tensor-format json) ;;
      grpc) args+=(-i grpc -u "127.0.0.1:$GRPC_PORT") ;;
      grpc-streaming) args+=(-i grpc --streaming -u "127.0.0.1:$GRPC_PORT") ;;
      http-shm) args+=(-i http -u "127.0.0.1:$PORT" --shared-memory system) ;;
      grpc-shm) args+=(-i grpc -u "127.0.0.1:$GRPC_PORT" --shared-memory system) ;;
    esac
    log "perf_analyzer ${args[*]}"
    echo "perf_analyzer ${args[*]}" >> "$OUT/commands.txt"
    "${RUN[@]}" "${args[@]}" > "$OUT/pa-$m-$mode.log" 2>&1 || { tail -20 "$OUT/pa-$m-$mode.log" >&2; exit 1; }
    if [[ ${#RUN[@]} -gt 1 ]]; then cp "$rootfs/tmp/pa-$m-$mode.csv" "$OUT/"; else cp "/tmp/pa-$m-$mode.csv" "$OUT/"; fi
    format=${mode#http-}
    format=${format%-streaming}  # LoadGenerator has no streaming: its gRPC calls beside
    [[ $format != grpc-shm ]] || continue  # nor gRPC through shared memory: its row has perf_analyzer's only
    for c in $(seq "$lo" "$hi"); do
      java -XX:+UseSerialGC -Xmx256m -cp "$CP" io.etserve.bench.LoadGenerator --url "http://127.0.0.1:$PORT" \
        --grpc-port "$GRPC_PORT" --server-pid "$SERVER_PID" --model "$m" --format "$format" --concurrency "$c" \
        --warmup "$WARMUP" --duration "$DURATION" --json-out "$OUT/loadgen.jsonl" --label "$mode" >&2
    done
  done
done

{
  echo "host: $(nproc) CPUs, load after the run: $(cut -d' ' -f1-3 /proc/loadavg); perf-analyzer $PA_VERSION ($(cut -c1-16 "$OUT/wheel.sha256")...); commit $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (+ changes)')"
  python3 - "$OUT" "$MODELS" "$MODES" <<'PY'
import csv, json, sys
out, models, modes = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
lg = {}
for line in open(f"{out}/loadgen.jsonl"):
    j = json.loads(line)
    lg[(j["model"], j["label"], j["concurrency"])] = j
print("| model | mode | c | perf_analyzer infer/s | p50 us | p99 us | server queue us | server compute us | LoadGenerator req/s | p50 us | p99 us |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for m in models:
    for mode in modes:
        for row in csv.DictReader(open(f"{out}/pa-{m}-{mode}.csv")):
            c = int(row["Concurrency"])
            compute = sum(int(row[k]) for k in ("Server Compute Input", "Server Compute Infer", "Server Compute Output"))
            g = lg.get((m, mode, c), {})
            print(f"| {m} | {mode} | {c} | {float(row['Inferences/Second']):.0f} | {row['p50 latency']} | {row['p99 latency']}"
                  f" | {row['Server Queue']} | {compute} | {g.get('throughput_rps', '-')} | {g.get('p50_us', '-')} | {g.get('p99_us', '-')} |")
PY
} | tee "$OUT/summary.md"
