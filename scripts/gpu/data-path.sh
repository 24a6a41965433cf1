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
# same rounds, label base), ETSERVE_DATA_PATH_BASELINE_JAR (the application jar of another build,
# as `bundle` extracts it, carried here: served beside this one on the bundle's libraries, in the
# same rounds, label base, with ETSERVE_DATA_PATH_BASELINE_ARGS or else ETSERVE_DATA_PATH_ARGS),
# SERVICE_CPUS (the service's and the echo's CPUs; run the step under `taskset -c` for the
# client's).
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
  local baseline=() base_jar=$JAR
  if [[ -n ${ETSERVE_DATA_PATH_BASELINE_JAR:-} ]]; then
    # Beside the bundle's jar, so that its manifest's class path finds the same lib/.
    base_jar="$(dirname "$JAR")/etserve-base.jar"
    cp "$ETSERVE_DATA_PATH_BASELINE_JAR" "$base_jar" || die "no baseline jar $ETSERVE_DATA_PATH_BASELINE_JAR"
  fi
  [[ -z ${ETSERVE_DATA_PATH_BASELINE_ARGS+set} && -z ${ETSERVE_DATA_PATH_BASELINE_JAR:-} ]] \
    || baseline=(BENCH_BASELINE_JAR="$base_jar" BENCH_BASELINE_UNPLANNED=1
      BENCH_BASELINE_ARGS="$(bundle_bridge_arg) ${ETSERVE_DATA_PATH_BASELINE_ARGS-${ETSERVE_DATA_PATH_ARGS:-}}")
  local st=0
  bundle_bench data-path "${ETSERVE_DATA_PATH_ARGS:-}" "${baseline[@]}" \
    BENCH_MODELS="$models" BENCH_FORMATS="${ETSERVE_DATA_PATH_FORMATS:-binary grpc}" \
    BENCH_ROUNDS="${ETSERVE_DATA_PATH_ROUNDS:-3}" BENCH_CONCURRENCY="${ETSERVE_DATA_PATH_CONCURRENCY:-1 2}" \
    BENCH_DURATION="${ETSERVE_DATA_PATH_DURATION:-5}" BENCH_WARMUP=2 || st=1
  cp "$ROOT/target/bench/data-path-forward.txt" "$RESULTS/gpu-data-path-forward.txt" 2>/dev/null || true
  return $st
}

# A small CPU model on ExecuTorch's CPU threadpool and off it (config.yml's cpu-threadpool: false),
# through bench/cpu-threadpool.sh with the bundle's JRE, jar and test classes: on a host whose
# pool is as large as the service's CPUs (SERVICE_CPUS, e.g. 0-7: eight threads). Knobs: those
# of bench/cpu-threadpool.sh (BENCH_MODEL, BENCH_FORMATS, BENCH_CONCURRENCY, BENCH_ROUNDS ...).
cpu_threadpool_bench() {
  bundle_bench cpu-threadpool "${BENCH_SERVICE_ARGS:-}"
}

# The service argument that points it at the host's GPU build of the bridge when stage1 made one;
# nothing (the jar's own CPU build) otherwise: the benches' CPU programs run on XNNPACK either way.
bundle_bridge_arg() {
  [[ ! -f "$STAGE/libetserve_jni.so" ]] || echo "--etserve.native.library-dir=$STAGE"
}

# bundle_bench NAME SERVICE_ARGS [VAR=VALUE ...]: bench/NAME.sh with the bundle's JRE, jar and
# test classes (the extracted jar runs in place, its lib/ beside it), the service on SERVICE_CPUS
# with bundle_bridge_arg and SERVICE_ARGS, and the further environment given. Writes
# $RESULTS/gpu-NAME.txt (its output), -log.txt, .md (with the host's facts) and .jsonl; returns
# the script's status.
bundle_bench() {
  local name=$1 args=$2 st=0
  shift 2
  mkdir -p "$RESULTS"
  env PATH="$(dirname "$JAVA"):$PATH" BENCH_CP="$CHECK_CP" BENCH_JAR="$JAR" SERVICE_JAR="$JAR" \
    BENCH_SERVICE_ARGS="$(bundle_bridge_arg) $args" BENCH_SERVER_CPUS="${SERVICE_CPUS:-}" "$@" \
    bash "$ROOT/bench/$name.sh" > "$RESULTS/gpu-$name.txt" 2> "$RESULTS/gpu-$name-log.txt" || st=1
  { host_facts; cat "$RESULTS/gpu-$name.txt"; } > "$RESULTS/gpu-$name.md"
  cp "$ROOT/target/bench/$name.jsonl" "$RESULTS/gpu-$name.jsonl" 2>/dev/null || true
  cat "$RESULTS/gpu-$name.md"
  return $st
}
