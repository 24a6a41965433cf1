# The native side on the GPU (sourced by scripts/gpu-suite.sh): the bridge and the probe
# delegate built with CUDA, the GPU ordering check, the C++ tests, the completion waits on bare
# CUDA and the linkage gate on what was built.
# Builds the bridge and the probe with CUDA against an ExecuTorch SDK, then the C++ checks.
native_suite() {
  local sdk="$1" caller_stream="$2"
  cuda_env
  mkdir -p "$RESULTS"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$RESULTS/gpu.txt" || true
  log "native build with CUDA"
  ETSERVE_EXECUTORCH_DIR="$sdk" ETSERVE_CALLER_STREAM_LIBRARY="$caller_stream" ETSERVE_NATIVE_BUILD_DIR="$BUILD" \
    ETSERVE_NATIVE_STAGE_DIR="$WORK/native-gpu-stage" ETSERVE_NATIVE_JOBS="$(nproc)" bash "$ROOT/native/build.sh" build 2>&1 | tail -5
  [[ -f "$STAGE/libetserve_jni.so" && -f "$PROBE" ]] || die "the GPU build did not produce the bridge and the probe"
  local status=0
  log "GPU ordering check and C++ tests"
  ctest --test-dir "$BUILD" --output-on-failure -R '^gpu\.' 2>&1 | tee "$RESULTS/ctest-gpu.txt" || status=1
  if [[ -x "$BUILD/tests/etserve_native_tests" ]]; then
    timeout 120 "$BUILD/tests/etserve_native_tests" 2>&1 | tail -3 | tee -a "$RESULTS/ctest-gpu.txt" || status=1
  fi
  # How the host's cores sleep: the completion wait sleeps through the GPU time, and what runs
  # after it pays for a deep idle state.
  { echo "cpuidle: $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null) / $(cat /sys/devices/system/cpu/cpuidle/current_governor_ro /sys/devices/system/cpu/cpuidle/current_governor 2>/dev/null | head -1)"
    for st in /sys/devices/system/cpu/cpu0/cpuidle/state*; do
      [[ -d "$st" ]] && echo "  $(cat "$st/name") latency $(cat "$st/latency") us, residency $(cat "$st/residency") us, disabled $(cat "$st/disable")"
    done
    echo "cpufreq: $(cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_driver /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>/dev/null | tr '\n' ' ')"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"; } 2>&1 | tee "$RESULTS/host-power.txt"
  log "completion-wait schedules on this host (bare CUDA)"
  if [[ -n "${ETSERVE_SKIP_BENCH:-}" ]]; then
    log "skipped (ETSERVE_SKIP_BENCH)"
  elif cmake --build "$BUILD" --target etserve_gpu_wait_bench 2>&1 | tail -3; then
    timeout 240 "$BUILD/testing/caller_stream_probe/etserve_gpu_wait_bench" 2>&1 | tee "$RESULTS/wait-gpu.txt" || status=1
  else
    status=1
  fi
  log "linkage gate on the GPU build"
  { bash "$ROOT/native/scripts/check-linkage.sh" --bridge "$BUILD/libetserve_jni.so" && \
    bash "$ROOT/native/scripts/check-linkage.sh" --dir "$STAGE"; } 2>&1 | tee "$RESULTS/linkage-gpu.txt" || status=1
  return $status
}
