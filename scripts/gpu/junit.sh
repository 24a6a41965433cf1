# The Java side in process on the GPU (sourced by scripts/gpu-suite.sh): the JUnit `gpu` suite,
# the sticky fault in its own JVM and the in-process GPU benchmark.
# The JUnit GPU suite, the sticky fault in its own JVM, and the GPU benchmark.
junit_suite() {
  local java="$1" cp="$2" console="$3"
  cuda_env
  local status=0
  log "GPU JUnit suite"
  timeout 300 "$java" "${GPU_TEST_PROPS[@]}" -jar "$console" execute --class-path "$cp" --select-package io.etserve.gpu \
    --include-tag gpu --details=tree --disable-banner 2>&1 | tee "$RESULTS/junit-gpu.txt" || status=1
  log "GPU sticky-fault test (own JVM, last: it leaves the CUDA context unusable)"
  timeout 120 "$java" "${GPU_TEST_PROPS[@]}" -jar "$console" execute --class-path "$cp" --select-package io.etserve.gpu \
    --include-tag gpu-fault --details=tree --disable-banner 2>&1 | tee "$RESULTS/junit-gpu-fault.txt" || status=1
  if [[ -z "${ETSERVE_SKIP_BENCH:-}" ]]; then
    log "GPU benchmark"
    gpu_benchmark "$java" "$cp" | tee "$RESULTS/benchmark-gpu.txt" || status=1
  fi
  return $status
}

# The in-process GPU benchmark (GpuStreamBenchmark) on the GPU build, to stdout; ETSERVE_BENCH_*
# pass its arguments (sections=waits: the completion waits alone).
gpu_benchmark() {
  local java="$1" cp="$2"
  timeout 300 "$java" "${GPU_TEST_PROPS[@]}" -cp "$cp" io.etserve.gpu.GpuStreamBenchmark \
    "${ETSERVE_BENCH_SPIN_US:-2000}" "${ETSERVE_BENCH_SECONDS:-3}" "${ETSERVE_BENCH_CALLS:-20000}" \
    "${ETSERVE_BENCH_SECTIONS:-all}" 2>&1
}
