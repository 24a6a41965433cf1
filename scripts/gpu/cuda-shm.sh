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
    echo "liveness: $(python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())' \
      "http://127.0.0.1:$MGMT/actuator/health/liveness")" || status=1
    echo "the service's log on CUDA IPC and errors:"
    grep -E "CUDA IPC|cudaIpc|ERROR" "$SERVICE_LOG" | head -20 || true
  } > "$out" 2>&1
  cat "$out"
  stop_service
  return $status
}
