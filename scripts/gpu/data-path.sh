# Sourced by scripts/gpu-suite.sh: issue 26's large-tensor rows on a GPU host (4 MiB FP32 in and
# 4 MiB out, y = 2x + 1 on XNNPACK, as users export it and with unplanned inputs and outputs),
# through bench/data-path.sh with the bundle's JRE, jar and test classes: each format's tensor
# MB/s against a bare echo of the same bytes, and the server's CPU per request.
#
# Knobs: ETSERVE_DATA_PATH_MODELS ("affine-4mib affine-4mib-unplanned", either or both),
# ETSERVE_DATA_PATH_FORMATS ("binary grpc"), ETSERVE_DATA_PATH_ROUNDS (3),
# ETSERVE_DATA_PATH_CONCURRENCY ("1 2"),
# ETSERVE_DATA_PATH_DURATION (5 s), ETSERVE_DATA_PATH_ARGS (more service arguments),
# ETSERVE_DATA_PATH_BASELINE_ARGS (set: the same jar beside it with these arguments instead, in the
# same rounds, label base), SERVICE_CPUS (the service's and the echo's CPUs; run the step under
# `taskset -c` for the client's).
data_path_bench() {
  local models="${ETSERVE_DATA_PATH_MODELS:-affine-4mib affine-4mib-unplanned}" m dir
  for m in $models; do
    # The reference written below is the 4 MiB one (1x1048576).
    [[ $m == affine-4mib* ]] || die "the data-path step serves affine-4mib and affine-4mib-unplanned, not $m"
    dir="$ROOT/target/bench-models/$m"
    rm -rf "$dir" && mkdir -p "$dir/1"
    if [[ -f "$WORK/bench-models/$m/1/model.pte" ]]; then
      cp -r "$WORK/bench-models/$m/." "$dir/"
    elif [[ -f "$ROOT/src/test/resources/models/$m/1/model.pte" ]]; then
      cp -r "$ROOT/src/test/resources/models/$m/." "$dir/"
    else
      die "no program for $m: bundle exports it (scripts/gpu-suite.sh bundle), or name another"
    fi
    python3 "$GPU_SCRIPTS/affine_reference.py" "$dir" $((1024 * 1024)) || die "could not write $m's reference"
  done
  mkdir -p "$RESULTS"
  local st=0 native=""
  # The host's GPU build of the bridge when stage1 made one, else the jar's own (CPU) build: these
  # programs run on XNNPACK either way.
  [[ ! -f "$STAGE/libetserve_jni.so" ]] || native="--etserve.native.library-dir=$STAGE"
  local baseline=()
  [[ -z ${ETSERVE_DATA_PATH_BASELINE_ARGS+set} ]] || baseline=(BENCH_BASELINE_JAR="$JAR" BENCH_BASELINE_UNPLANNED=1
    BENCH_BASELINE_ARGS="$native ${ETSERVE_DATA_PATH_BASELINE_ARGS}")
  env "${baseline[@]}" PATH="$(dirname "$JAVA"):$PATH" BENCH_CP="$CHECK_CP" BENCH_JAR="$JAR" SERVICE_JAR="$JAR" \
    BENCH_SERVICE_ARGS="$native ${ETSERVE_DATA_PATH_ARGS:-}" BENCH_SERVER_CPUS="${SERVICE_CPUS:-}" \
    BENCH_MODELS="$models" BENCH_FORMATS="${ETSERVE_DATA_PATH_FORMATS:-binary grpc}" \
    BENCH_ROUNDS="${ETSERVE_DATA_PATH_ROUNDS:-3}" BENCH_CONCURRENCY="${ETSERVE_DATA_PATH_CONCURRENCY:-1 2}" \
    BENCH_DURATION="${ETSERVE_DATA_PATH_DURATION:-5}" BENCH_WARMUP=2 \
    bash "$ROOT/bench/data-path.sh" > "$RESULTS/gpu-data-path.txt" 2> "$RESULTS/gpu-data-path-log.txt" || st=1
  { host_facts; cat "$RESULTS/gpu-data-path.txt"; } > "$RESULTS/gpu-data-path.md"
  cp "$ROOT/target/bench/data-path.jsonl" "$RESULTS/gpu-data-path.jsonl" 2>/dev/null || true
  cp "$ROOT/target/bench/data-path-forward.txt" "$RESULTS/gpu-data-path-forward.txt" 2>/dev/null || true
  cat "$RESULTS/gpu-data-path.md"
  return $st
}

# A small CPU model on ExecuTorch's CPU threadpool and off it (config.yml's cpu-threadpool: false),
# through bench/cpu-threadpool.sh with the bundle's JRE, jar and test classes: on a host whose
# pool is as large as the service's CPUs (SERVICE_CPUS, e.g. 0-7: eight threads). Knobs: those
# of bench/cpu-threadpool.sh (BENCH_MODEL, BENCH_FORMATS, BENCH_CONCURRENCY, BENCH_ROUNDS ...).
cpu_threadpool_bench() {
  mkdir -p "$RESULTS"
  local st=0 native=""
  [[ ! -f "$STAGE/libetserve_jni.so" ]] || native="--etserve.native.library-dir=$STAGE"
  # SERVICE_JAR: the bundle's extracted jar runs in place (its lib/ beside it), not copied.
  env PATH="$(dirname "$JAVA"):$PATH" BENCH_CP="$CHECK_CP" BENCH_JAR="$JAR" SERVICE_JAR="$JAR" \
    BENCH_SERVICE_ARGS="$native ${BENCH_SERVICE_ARGS:-}" BENCH_SERVER_CPUS="${SERVICE_CPUS:-}" \
    bash "$ROOT/bench/cpu-threadpool.sh" > "$RESULTS/gpu-cpu-threadpool.txt" 2> "$RESULTS/gpu-cpu-threadpool-log.txt" || st=1
  { host_facts; cat "$RESULTS/gpu-cpu-threadpool.txt"; } > "$RESULTS/gpu-cpu-threadpool.md"
  cp "$ROOT/target/bench/cpu-threadpool.jsonl" "$RESULTS/gpu-cpu-threadpool.jsonl" 2>/dev/null || true
  cat "$RESULTS/gpu-cpu-threadpool.md"
  return $st
}
