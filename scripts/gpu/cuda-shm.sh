# shellcheck shell=bash
# Triton's CUDA shared memory through the packaged service, checked with Triton's own Python
# client (tritonclient's cuda_shared_memory utilities over cuda-python, carried as wheels:
# `scripts/gpu-suite.sh bundle-clients` there, then a transfer of .device/clients): device memory
# registered by its IPC handle over REST and gRPC, inputs read from it and outputs written into
# it, compared with the models' PyTorch references, and the refusals
# (src/test/python/triton_cuda_shm_check.py). Sourced by scripts/gpu-suite.sh.

cuda_shm_check() {
  local out="$RESULTS/gpu-h200-cuda-shm.txt" site status=0 model
  site="$(unpack_clients)" || return 1
  make_repo "$WORK/service-repo" 2
  start_service "$WORK/service-repo" --etserve.shared-memory.enabled=true
  {
    echo "# CUDA shared memory with Triton's Python client ($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(python3 --version))"
    for model in demo-portable demo-xnnpack; do
      echo "## $model"
      PYTHONPATH="$site" python3 "$ROOT/src/test/python/triton_cuda_shm_check.py" "127.0.0.1:$PORT" \
        "127.0.0.1:$GRPC" "$ROOT/models" "$model" || status=1
    done
    # Still up, and live, after the refusals.
    service_after_shm || status=1
  } > "$out" 2>&1
  cat "$out"
  stop_service
  return $status
}

# Triton's perf_analyzer (PyPI perf-analyzer, the pinned wheel carried in .device/perf-analyzer:
# `scripts/gpu-suite.sh bundle-perf-analyzer` there) against the packaged service: the demo model
# over HTTP and gRPC with its tensors in the request (--shared-memory none), in system shared
# memory and in CUDA shared memory (device memory perf_analyzer allocates and registers; every
# concurrent request names the same regions), at concurrency 1 to 4. perf_analyzer loads the CUDA
# runtime (libcudart.so) for either kind of shared memory: the toolkit's, through cuda_env.
# Knobs: PA_MODELS (demo-xnnpack), PA_CONCURRENCY (1:4), PA_INTERVAL_MS (3000), PA_STABILITY
# (perf_analyzer's -s, 10 %: raise it on a loaded host). Checked on the 2-core build machine (no
# GPU: perf_analyzer in a Debian trixie chroot) for the request's and system shared memory only.
cuda_shm_perf_analyzer() {
  local out="$RESULTS/gpu-h200-pa-cuda-shm.txt" pa status=0 m mode proto memory
  pa="$(unpack_perf_analyzer)" || return 1
  make_repo "$WORK/service-repo" 2
  start_service "$WORK/service-repo" --etserve.shared-memory.enabled=true
  mkdir -p "$RESULTS/perf-analyzer"
  {
    echo "# perf_analyzer $PA_VERSION, tensors in the request and in shared memory ($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) cores)"
    host_facts
    for m in ${PA_MODELS:-demo-xnnpack}; do
      for mode in http-none http-system http-cuda grpc-none grpc-system grpc-cuda; do
        proto=${mode%-*} memory=${mode#*-}
        local args=(-m "$m" -i "$proto" -u "127.0.0.1:$([[ $proto == http ]] && echo "$PORT" || echo "$GRPC")"
          --shared-memory "$memory" --concurrency-range "${PA_CONCURRENCY:-1:4}"
          --measurement-interval "${PA_INTERVAL_MS:-3000}" -s "${PA_STABILITY:-10}"
          -f "$RESULTS/perf-analyzer/$m-$mode.csv")
        echo "perf_analyzer ${args[*]}"
        "$pa" "${args[@]}" > "$RESULTS/perf-analyzer/$m-$mode.log" 2>&1 \
          || { status=1; echo "FAIL $m $mode:"; tail -15 "$RESULTS/perf-analyzer/$m-$mode.log"; }
      done
    done
    python3 - "$RESULTS/perf-analyzer" <<'PY'
import csv, pathlib, sys
print("| model | protocol | tensors | c | infer/s | p50 us | p99 us | server compute input us | server compute infer us | server compute output us |")
print("|---|---|---|---|---|---|---|---|---|---|")
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.csv")):
    model, proto, memory = f.stem.rsplit("-", 2)
    for row in csv.DictReader(open(f)):
        print(f"| {model} | {proto} | {memory} | {row['Concurrency']}"
              f" | {float(row['Inferences/Second']):.0f} | {row['p50 latency']} | {row['p99 latency']}"
              f" | {row['Server Compute Input']} | {row['Server Compute Infer']} | {row['Server Compute Output']} |")
PY
    echo "regions left registered (perf_analyzer unregisters its own): $(loopback_get \
      "http://127.0.0.1:$PORT/v2/cudasharedmemory/status")"
    service_after_shm || status=1
  } > "$out" 2>&1
  cat "$out"
  stop_service
  return $status
}

# The body of a GET on the loopback (python3: the GPU host may have no curl); fails on an error status.
loopback_get() {
  python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())' "$1"
}

# What the shared-memory steps end with: liveness (fails unless 200) and the service's log on
# CUDA IPC and errors.
service_after_shm() {
  local live
  live="$(loopback_get "http://127.0.0.1:$MGMT/actuator/health/liveness")" || { echo "liveness: not 200"; return 1; }
  echo "liveness: $live"
  echo "the service's log on CUDA IPC and errors:"
  grep -E "CUDA IPC|cudaIpc|ERROR" "$SERVICE_LOG" | head -20 || true
}
