# The packaged service on the GPU (sourced by scripts/gpu-suite.sh): time to ready, dynamic
# batching, throughput and service CPU per call, JVM option sets, and the whole service run.
# Three starts each: the fat jar (where there is one: FAT_JAR), the extracted jar with the context
# built at startup and as it starts by default (Spring AOT mode: the context generated at build
# time), and the extracted jar with an ahead-of-time cache (Java 25: -XX:AOTCacheOutput, else a
# CDS archive) trained as the image trains it, then without the early CUDA start; each with and
# without preloading the classes the build recorded.
startup_bench() {
  local repo="$1" ms=() cpu=() jar_saved="$JAR"
  echo
  echo "Time to ready (3 starts each, median; $("$JAVA" -version 2>&1 | head -1); GPU models: probe and probe-fault, CPU: demo-xnnpack, demo-portable):"
  echo
  echo "| launch | ms to ready | startup CPU s |"
  echo "|---|---|---|"
  local extracted="$WORK/extracted"
  if [[ -n "${FAT_JAR:-}" ]]; then
    JAR="$FAT_JAR"
    for _ in 1 2 3; do
      start_service "$repo" --etserve.cuda.streams-per-device=4
      ms+=("$READY_MS"); cpu+=("$STARTUP_CPU"); stop_service
    done
    echo "| java -jar etserve.jar | $(median "${ms[@]}") | $(median "${cpu[@]}") |"
    rm -rf "$extracted"
    (cd "$WORK" && "$JAVA" -Djarmode=tools -jar "$FAT_JAR" extract --destination "$extracted" >/dev/null) || return 1
    JAR="$extracted/$(basename "$FAT_JAR")"
  else
    extracted="$(dirname "$JAR")"  # the bundle carries the application extracted
  fi
  rm -f "$extracted/app.aot" "$extracted/app.jsa"  # never measure a cache a training run left behind
  # The plain extracted jar with the context built at startup, then as `java -jar` starts it now
  # (Spring AOT mode by default).
  # Then without preloading the classes the build recorded (StartupClassPreload), and with the
  # Java options ETSERVE_STARTUP_OPTIONS lists, ';' between sets (e.g. other preload thread counts).
  local spring variants=("-Dspring.aot.enabled=false" "" "-Detserve.startup.preload-threads=0")
  if [[ -n ${ETSERVE_STARTUP_OPTIONS:-} ]]; then
    local extra; IFS=';' read -r -a extra <<< "$ETSERVE_STARTUP_OPTIONS"; variants+=("${extra[@]}")
  fi
  for spring in "${variants[@]}"; do
    ms=() cpu=()
    for _ in 1 2 3; do
      JAVA_EXTRA="$spring" start_service "$repo" --etserve.cuda.streams-per-device=4
      ms+=("$READY_MS"); cpu+=("$STARTUP_CPU"); stop_service
    done
    echo "| extracted jar (java -Djarmode=tools -jar etserve.jar extract), ${spring:-Spring AOT mode by default} | $(median "${ms[@]}") | $(median "${cpu[@]}") |"
  done
  local feature train use what
  feature="$("$JAVA" -XshowSettings:properties -version 2>&1 | awk -F' = ' '/java.specification.version/ {print $2; exit}')"
  # The cache is trained in the mode it then serves, as the image's is.
  spring="$IMAGE_JVM_OPTS"
  rm -f "$extracted/app.aot" "$extracted/app.jsa"
  if (( feature >= 25 )); then
    use="-XX:AOTCache=$extracted/app.aot -Xlog:aot=off -Xlog:cds=off $spring"; what="AOT cache"
    train_aot_cache "$JAR" "$extracted/app.aot" "$RESULTS/aot-training.log" "$repo" || true
  else
    train="-XX:ArchiveClassesAtExit=app.jsa -Xlog:cds=off $spring"; use="-XX:SharedArchiveFile=$extracted/app.jsa -Xlog:cds=off $spring"; what="CDS archive"
    # shellcheck disable=SC2086
    (cd "$extracted" && "$JAVA" --enable-native-access=ALL-UNNAMED $train \
      -Dspring.context.exit=onRefresh -jar "$JAR" --server.port=0 --management.server.port=0 --etserve.grpc.port=0 \
      --etserve.model-repository="$repo" --etserve.native.library-dir="$STAGE" \
      --etserve.native.extra-libraries="$PROBE" >"$RESULTS/aot-training.log" 2>&1) || true
  fi
  if [[ ! -s "$extracted/app.aot" && ! -s "$extracted/app.jsa" ]]; then
    echo "| extracted jar + $what, Spring AOT mode | training run failed: $RESULTS/aot-training.log | - |"
    JAR="$jar_saved"; return 1
  fi
  # As the image starts; then without starting CUDA beside the context (etserve.cuda.early-start):
  # what that saves.
  # And with the jar's class preloading, which the image turns off (the classes come from the cache).
  local variant
  for variant in "" "--etserve.cuda.early-start=false" "-Detserve.startup.preload-threads=4"; do
    ms=() cpu=()
    for _ in 1 2 3; do
      # shellcheck disable=SC2086
      if [[ $variant == -D* ]]; then
        JAVA_EXTRA="$use $variant" start_service "$repo" --etserve.cuda.streams-per-device=4
      else
        JAVA_EXTRA="$use" start_service "$repo" --etserve.cuda.streams-per-device=4 $variant
      fi
      ms+=("$READY_MS"); cpu+=("$STARTUP_CPU"); stop_service
    done
    echo "| extracted jar + $what, Spring AOT mode (as in the image)${variant:+, $variant} | $(median "${ms[@]}") | $(median "${cpu[@]}") |"
  done
  # ETSERVE_ASYNC_PROFILER=/path/libasyncProfiler.so: one more start as the image's, wall-clock
  # profiled per thread (what the main thread waits on where cores are free), with the early
  # starts' timings logged.
  if [[ -n ${ETSERVE_ASYNC_PROFILER:-} && -f $ETSERVE_ASYNC_PROFILER ]]; then
    JAVA_EXTRA="$use -agentpath:$ETSERVE_ASYNC_PROFILER=start,event=wall,interval=1ms,threads,file=$RESULTS/startup-wall.collapsed,collapsed" \
      start_service "$repo" --etserve.cuda.streams-per-device=4 --logging.level.io.etserve.cuda.CudaEarlyStart=debug
    echo "| (profiled: $RESULTS/startup-wall.collapsed) extracted jar + $what, Spring AOT mode | $READY_MS | $STARTUP_CPU |"
    stop_service
  fi
  JAR="$jar_saved"
}

# A step's table ends with the checks' CPU per call by thread kind; prints it, returns the status.
end_table() {
  { echo; grep '^\[cpu by thread\]' "$RESULTS/check-stderr.txt" || true; } >> "$1"
  cat "$1"
  return "$2"
}

# Dynamic batching with the device as the bottleneck (one stream, one instance, as a model whose
# kernels fill the GPU): one-row requests, one 2 ms kernel per forward call, alone vs batched.
# Prints one table row per run; fails when a check does.
batching_bench() {
  local repo="$1" status=0 c
  make_repo "$repo" 1
  mkdir -p "$repo/probe-batched/1"
  cp "$ROOT/src/test/resources/models/batched-probe/1/model.pte" "$repo/probe-batched/1/"
  printf 'inputs: [ { name: x, dims: [-1, 2] } ]\noutputs: [ { name: observed } ]\nplacement: gpu\ninstances: 1\ndynamic-batching: { max-batch-size: 32, max-queue-delay: 500us }\n' \
    > "$repo/probe-batched/config.yml"
  start_service "$repo" --etserve.cuda.streams-per-device=1 >&2
  for c in 1 4 16; do
    check batching port=$PORT mgmt=$MGMT model=probe spin=2000 clients=$c seconds=3 pid=$SERVICE_PID label="alone" || status=1
    check batching port=$PORT mgmt=$MGMT model=probe-batched rows=1 spin=2000 clients=$c seconds=3 pid=$SERVICE_PID label="batched" || status=1
  done
  stop_service
  return $status
}

BATCHING_HEADER="| run | clients | kernel us | requests/s | forward calls/s | rows per call | p50 us | p99 us | service CPU per request us | failed |
|---|---|---|---|---|---|---|---|---|---|"

THR_HEADER="| run | clients | kernel us | calls/s | p50 us | p99 us | service CPU per call us | CPU % of kernel | failed |
|---|---|---|---|---|---|---|---|---|"

# Throughput and service CPU for K = 1, 4, 16 streams at K and 2K clients (2 ms kernel; 10 ms at
# K = 4), then the same with the spinning wait; the start of each service goes to the table in
# $2, the rows to ROWS (checks: health, handshake, SIGTERM at K = 16 among them).
throughput_rows() {
  local repo="$1" out="$2" status=0 k kernel
  for k in 1 4 16; do
    make_repo "$repo" $((2 * k))
    start_service "$repo" --etserve.cuda.streams-per-device=$k
    echo "| K=$k | $k | adaptive | $READY_MS | $STARTUP_CPU |" >> "$out"
    ROWS+=("$(check health port=$PORT mgmt=$MGMT)") || status=1
    ROWS+=("$(check handshake port=$PORT mgmt=$MGMT model=probe clients=$((2 * k)) calls=100 expect=$k spin=100)") || status=1
    ROWS+=("$(check grpc grpc-port=$GRPC model=probe clients=$((2 * k)) calls=50 expect=$k spin=100)") || status=1
    ROWS+=("$(check throughput port=$PORT model=probe spin=2000 clients=$k seconds=4 pid=$SERVICE_PID label="K=$k adaptive")") || status=1
    ROWS+=("$(check throughput port=$PORT model=probe spin=2000 clients=$((2 * k)) seconds=4 pid=$SERVICE_PID label="K=$k adaptive")") || status=1
    if [[ $k == 4 ]]; then
      ROWS+=("$(check throughput port=$PORT model=probe spin=10000 clients=4 seconds=4 pid=$SERVICE_PID label="K=4 adaptive")") || status=1
      ROWS+=("$(check throughput port=$PORT model=probe spin=10000 clients=8 seconds=4 pid=$SERVICE_PID label="K=4 adaptive")") || status=1
      # The REST path without GPU time: back to back, then with each client pausing 2 ms
      # between calls, so the service idles as it does during a 2 ms kernel. Their difference
      # is what idling alone costs a request on this host, whatever the completion wait does.
      ROWS+=("$(check throughput port=$PORT model=probe spin=0 clients=4 seconds=4 pid=$SERVICE_PID label="K=4 no GPU time")") || status=1
      ROWS+=("$(check throughput port=$PORT model=probe spin=0 clients=4 seconds=4 pause-us=2000 pid=$SERVICE_PID label="K=4 no GPU time, clients pause 2 ms")") || status=1
    fi
    if [[ $k == 16 ]]; then
      ROWS+=("$(check sigterm port=$PORT model=probe pid=$SERVICE_PID calls=4 spin=800000)") || status=1
      for _ in $(seq 1 300); do kill -0 "$SERVICE_PID" 2>/dev/null || break; sleep 0.1; done
    fi
    stop_service
  done
  # The adaptive wait with its sleep sliced (etserve.cuda.sleep-slice; ETSERVE_SLICES_US, in
  # microseconds): the request thread keeps its core, for some CPU.
  local slice
  for slice in ${ETSERVE_SLICES_US:-50 100}; do
    make_repo "$repo" 8
    start_service "$repo" --etserve.cuda.streams-per-device=4 --etserve.cuda.sleep-slice="${slice}us"
    echo "| K=4 | 4 | adaptive, slice $slice us | $READY_MS | $STARTUP_CPU |" >> "$out"
    for kernel in 2000 10000; do
      ROWS+=("$(check throughput port=$PORT model=probe spin=$kernel clients=4 seconds=4 pid=$SERVICE_PID label="K=4 adaptive, slice $slice us")") || status=1
      ROWS+=("$(check throughput port=$PORT model=probe spin=$kernel clients=8 seconds=4 pid=$SERVICE_PID label="K=4 adaptive, slice $slice us")") || status=1
    done
    stop_service
  done
  # The old wait (cudaStreamSynchronize spins a core for the whole GPU time), for comparison.
  make_repo "$repo" 8
  start_service "$repo" --etserve.cuda.streams-per-device=4 --etserve.cuda.completion-wait=spin
  echo "| K=4 | 4 | spin | $READY_MS | $STARTUP_CPU |" >> "$out"
  for kernel in 2000 10000; do
    ROWS+=("$(check throughput port=$PORT model=probe spin=$kernel clients=4 seconds=4 pid=$SERVICE_PID label="K=4 spin")") || status=1
    ROWS+=("$(check throughput port=$PORT model=probe spin=$kernel clients=8 seconds=4 pid=$SERVICE_PID label="K=4 spin")") || status=1
  done
  stop_service
  return $status
}

# Throughput and service CPU through REST (K = 4 at 4 clients, 2 and 10 ms kernels; K = 16 at
# 16 clients) for each JVM option set in ETSERVE_JVM_VARIANTS, ';'-separated ("" = none), e.g.
# ETSERVE_JVM_VARIANTS=';-XX:+UseTransparentHugePages', the service pinned to SERVICE_CPUS if set;
# the handshake before each checks the completion-wait metric. Into $RESULTS/gpu-h200-jvm-options.txt.
jvm_options_bench() {
  local out="$RESULTS/gpu-h200-jvm-options.txt" st=0 v k kernel variants
  { echo "# JVM options against service CPU per call ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(nproc) cores)"
    echo "THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null), defrag $(cat /sys/kernel/mm/transparent_hugepage/defrag 2>/dev/null)"
    echo; echo "$THR_HEADER"; } > "$out"
  IFS=';' read -r -a variants <<< "${ETSERVE_JVM_VARIANTS:-;-XX:+UseTransparentHugePages}"
  [[ -z "${SERVICE_CPUS:-}" ]] || echo "service pinned to CPUs $SERVICE_CPUS (taskset)" >> "$out"
  for v in "${variants[@]}"; do
    for k in 4 16; do
      make_repo "$WORK/service-repo" $((2 * k))
      JAVA_EXTRA="$v" start_service "$WORK/service-repo" --etserve.cuda.streams-per-device=$k
      check handshake port=$PORT mgmt=$MGMT model=probe clients=$((2 * k)) calls=50 expect=$k spin=100 >> "$out" || st=1
      for kernel in 2000 10000; do
        [[ $k == 16 && $kernel == 10000 ]] && continue
        check throughput port=$PORT model=probe spin=$kernel clients=$k seconds=4 pid=$SERVICE_PID \
          label="K=$k ${v:-(no options)}" >> "$out" || st=1
      done
      stop_service
    done
  done
  end_table "$out" $st
}

# GPU work that never completes in time: a 20 s kernel against a 500 ms completion timeout. The
# call must fail within 2 s and the device count as hung (the sticky fault's checks), and SIGTERM
# must not wait for the kernel: the process is gone well before it ends. Rows on stdout.
hung_work_fault() {
  local repo="$1" st=0 t0 ms
  make_repo "$repo" 2
  start_service "$repo" --etserve.cuda.streams-per-device=4 --etserve.cuda.completion-timeout=500ms
  check fault port=$PORT mgmt=$MGMT model=probe-fault cpu-model=demo-xnnpack fault-spin=20000000 within-ms=2000 || st=1
  t0=$(date +%s%N)
  stop_service
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  (( ms < 15000 )) || st=1
  echo "| hung GPU work, then SIGTERM | exited after $ms ms (the kernel had ~18 s left) | $( ((st == 0)) && echo ok || echo FAILED) |"
  return $st
}

# What the JIT compiles while a GPU call's CPU is measured: the K = 4 rows keep showing the
# compiler threads' CPU (45-130 us per call) after warm-ups of 300,000 calls. One start of the
# current jar (ETSERVE_AB_CURRENT_ARGS) under a JFR recording of every compilation, the REST and
# then the gRPC K = 4 row, each summarised over its timed window by jfr_summary.py (what was
# compiled and deoptimized, and why). ETSERVE_AB_LEARN: seconds of the 2 ms kernel before each
# window (1; some minutes tell whether the JIT settles). The JVM prints its compilations too
# (-XX:+PrintCompilation, into the service's log) and logs its class loads: compilation_summary.py
# tells per 30 s of uptime what was compiled and why code went (JFR names uncommon traps only),
# and for each C2 compilation in a window what became of that method's earlier C2 code.
# ETSERVE_AB_JIT_JFR=0: without the JFR recording (whether it is what keeps the JIT busy).
# ETSERVE_ASYNC_PROFILER: the same run CPU-profiled per thread too, summarised by
# profile_summary.py (request threads against Netty's event loops; the raw profile stays in
# $WORK). Into $RESULTS/gpu-h200-jit.txt.
jit_bench() {
  local out="$RESULTS/gpu-h200-jit.txt" rec="$WORK/jit.jfr" st=0 via since until
  local jfr_tool; jfr_tool="$(dirname "$JAVA")/jfr"
  [[ -x "$jfr_tool" ]] || die "no jfr tool beside $JAVA (the bundle's JRE needs the jdk.jfr module)"
  local profiler="" prof="$WORK/jit-cpu.collapsed"
  rm -f "$prof"  # $WORK outlives a run: never summarise an earlier one's
  if [[ -n ${ETSERVE_ASYNC_PROFILER:-} && -f $ETSERVE_ASYNC_PROFILER ]]; then
    profiler="-agentpath:$ETSERVE_ASYNC_PROFILER=start,event=cpu,interval=100us,threads,file=$prof,collapsed"
  fi
  local jfr="-XX:StartFlightRecording=settings=profile,jdk.Compilation#threshold=0ms,filename=$rec" classes="$WORK/jit-classes.log"
  [[ ${ETSERVE_AB_JIT_JFR:-1} == 1 ]] || jfr=""
  rm -f "$rec" "$classes"
  make_repo "$WORK/service-repo" 8
  # shellcheck disable=SC2086
  JAVA_EXTRA="$jfr -XX:+PrintCompilation -Xlog:class+load=info:file=$classes:uptime $profiler" \
    start_service "$WORK/service-repo" --etserve.cuda.streams-per-device=4 ${ETSERVE_AB_CURRENT_ARGS:-}
  local log="$SERVICE_LOG"
  { echo "# The JIT during K = 4 GPU rows ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(nproc) cores)"
    host_facts; echo; echo "$THR_HEADER"; } > "$out"
  local windows=()
  for via in rest grpc; do
    local grpc=(); [[ $via == grpc ]] && grpc=(grpc-port="$GRPC")
    # The check warms up first (its default, with ETSERVE_AB_LEARN seconds of the 2 ms kernel),
    # then times 6 s: the window is its last 6 s.
    check throughput learn="${ETSERVE_AB_LEARN:-1}" port=$PORT mgmt=$MGMT "${grpc[@]}" model=probe spin=2000 clients=4 seconds=6 \
      pid=$SERVICE_PID label="$via K=4" >> "$out" || st=1
    until="$(date +%s.%N)"; since="$(awk -v u="$until" 'BEGIN{printf "%.3f", u - 6}')"
    # The check says where its window lay in the service's uptime, which PrintCompilation counts
    local span; span="$(grep -F "[window] $via K=4:" "$RESULTS/check-stderr.txt" | tail -1 | grep -o '[0-9.]*-[0-9.]* s$' || true)"
    windows+=("$via $since $until ${span%% *}")
  done
  stop_service  # the recording is written as the JVM exits
  local spans=()
  local uptime
  for w in "${windows[@]}"; do
    read -r via since until uptime <<< "$w"
    [[ -z $uptime ]] || spans+=(--window "$via K = 4:${uptime%-*}:${uptime#*-}")
    [[ -n $jfr ]] || continue
    { echo; echo "## $via K = 4: JFR over the timed window"
      python3 "$GPU_SCRIPTS/jfr_summary.py" "$rec" --jfr "$jfr_tool" --since "$since" --until "$until" || st=1; } >> "$out"
  done
  { echo; echo "## The JIT over the whole run (PrintCompilation${jfr:+; JFR recording}), the timed windows last"; echo
    python3 "$GPU_SCRIPTS/compilation_summary.py" "$log" --class-log "$classes" "${spans[@]}" || st=1; } >> "$out"
  if [[ -n $profiler ]]; then
    { echo; echo "## The whole run's CPU by thread kind (async-profiler, cpu, 100 us; mostly the 2 ms kernel's phases)"
      echo; python3 "$GPU_SCRIPTS/profile_summary.py" "$prof" --interval-us 100 --kind 'REST request threads=^\[?qtp' \
        --kind "gRPC event loops=grpc-(loop|default-worker)" --kind 'gRPC call workers=^\[?grpc-[0-9]' \
        --kind 'JIT compiler threads=Compiler' || st=1; } >> "$out"
  fi
  cat "$out"
  return $st
}

# The current application jar against a baseline on one host, interleaved (hosts of one kind
# differ by more than most changes do): for ETSERVE_AB_ROUNDS rounds (default 3), each side in
# turn serves the REST rows the issue's CPU goals are about: a 2 ms kernel at K = 4, then no GPU
# time back to back and with clients pausing 2 ms (ETSERVE_AB_K16=1: a 2 ms kernel at K = 16
# with 16 clients too; ETSERVE_AB_GRPC=1: the same K = 4 and pausing rows over gRPC).
# ETSERVE_BASELINE_JAR: the baseline's application jar, built as etserve.jar is (the extracted layout; its dependencies must match, since it runs against this
# bundle's lib/), or unset: the current jar on both sides. ETSERVE_AB_BASELINE_ARGS and
# ETSERVE_AB_CURRENT_ARGS: service arguments of each side (two settings of one jar compared).
# ETSERVE_ASYNC_PROFILER=/path/libasyncProfiler.so: then one more start of the current side, its
# K = 4 row CPU-profiled per thread into $RESULTS/ab-k4-cpu.collapsed, from the start on (the
# measured part outweighs the start and warm-up with ETSERVE_AB_PROFILE_SECONDS, default 6, at 30);
# with ETSERVE_AB_GRPC=1 the gRPC K = 4 row follows in that JVM (its own threads: Netty's event
# loops, grpc-#). ETSERVE_AB_GRPC_DEADLINE=S: each gRPC call with an S-second deadline (default none).
# Into $RESULTS/gpu-h200-ab.txt.
ab_bench() {
  local base="${ETSERVE_BASELINE_JAR:-$JAR}" out="$RESULTS/gpu-h200-ab.txt" st=0
  local current="$JAR" round which jar args
  # The warm-up of every row (GpuServiceCheck's warmup=, jit-calls= and learn=): ETSERVE_AB_WARMUP
  # seconds at most (8), ETSERVE_AB_JIT_CALLS short-kernel calls at most (30000), then
  # ETSERVE_AB_LEARN seconds of the row's own kernel (1).
  local warm="warmup=${ETSERVE_AB_WARMUP:-8} jit-calls=${ETSERVE_AB_JIT_CALLS:-30000} learn=${ETSERVE_AB_LEARN:-1}"
  warm+=" grpc-deadline-s=${ETSERVE_AB_GRPC_DEADLINE:-0}"
  cp "$base" "$WORK/app/baseline.jar"  # beside lib/, which its manifest's class path names
  { echo "# Baseline against current, interleaved ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(nproc) cores)"
    echo "baseline: $(basename "$base") ${ETSERVE_AB_BASELINE_ARGS:-}; current: $current ${ETSERVE_AB_CURRENT_ARGS:-}"; host_facts
    echo; echo "$THR_HEADER"; } > "$out"
  for round in $(seq 1 "${ETSERVE_AB_ROUNDS:-3}"); do
    for which in baseline current; do
      jar="$current"; args="${ETSERVE_AB_CURRENT_ARGS:-}"
      [[ $which == current ]] || { jar="$WORK/app/baseline.jar"; args="${ETSERVE_AB_BASELINE_ARGS:-}"; }
      make_repo "$WORK/service-repo" 8
      # shellcheck disable=SC2086
      JAR="$jar" start_service "$WORK/service-repo" --etserve.cuda.streams-per-device=4 $args
      check throughput $warm port=$PORT model=probe spin=2000 clients=4 seconds=4 pid=$SERVICE_PID label="$which r$round K=4" >> "$out" || st=1
      check throughput $warm port=$PORT model=probe spin=0 clients=4 seconds=4 pid=$SERVICE_PID label="$which r$round no GPU time" >> "$out" || st=1
      check throughput $warm port=$PORT model=probe spin=0 clients=4 seconds=4 pause-us=2000 pid=$SERVICE_PID \
        label="$which r$round no GPU time, clients pause 2 ms" >> "$out" || st=1
      if [[ ${ETSERVE_AB_GRPC:-0} == 1 ]]; then
        check throughput $warm port=$PORT grpc-port="$GRPC" model=probe spin=2000 clients=4 seconds=4 pid=$SERVICE_PID \
          label="$which r$round gRPC K=4" >> "$out" || st=1
        check throughput $warm port=$PORT grpc-port="$GRPC" model=probe spin=0 clients=4 seconds=4 pause-us=2000 \
          pid=$SERVICE_PID label="$which r$round gRPC no GPU time, clients pause 2 ms" >> "$out" || st=1
      fi
      stop_service
      if [[ ${ETSERVE_AB_K16:-0} == 1 ]]; then
        make_repo "$WORK/service-repo" 32
        # shellcheck disable=SC2086
        JAR="$jar" start_service "$WORK/service-repo" --etserve.cuda.streams-per-device=16 $args
        check throughput $warm port=$PORT model=probe spin=2000 clients=16 seconds=4 pid=$SERVICE_PID label="$which r$round K=16" >> "$out" || st=1
        stop_service
      fi
    done
  done
  if [[ -n ${ETSERVE_ASYNC_PROFILER:-} && -f $ETSERVE_ASYNC_PROFILER ]]; then
    make_repo "$WORK/service-repo" 8
    # shellcheck disable=SC2086
    JAVA_EXTRA="-agentpath:$ETSERVE_ASYNC_PROFILER=start,event=cpu,interval=100us,threads,file=$RESULTS/ab-k4-cpu.collapsed,collapsed" \
      start_service "$WORK/service-repo" --etserve.cuda.streams-per-device=4 ${ETSERVE_AB_CURRENT_ARGS:-}
    check throughput $warm port=$PORT model=probe spin=2000 clients=4 seconds="${ETSERVE_AB_PROFILE_SECONDS:-6}" pid=$SERVICE_PID \
      label="(profiled) current K=4" >> "$out" || st=1
    if [[ ${ETSERVE_AB_GRPC:-0} == 1 ]]; then
      check throughput $warm port=$PORT grpc-port="$GRPC" model=probe spin=2000 clients=4 \
        seconds="${ETSERVE_AB_PROFILE_SECONDS:-6}" pid=$SERVICE_PID label="(profiled) current gRPC K=4" >> "$out" || st=1
    fi
    stop_service
  fi
  end_table "$out" $st
}

# The JVM options the image starts with (Dockerfile): Spring AOT mode, the classes from the AOT
# cache (no preloading), reflection through native accessors.
IMAGE_JVM_OPTS="-Dspring.aot.enabled=true -Detserve.startup.preload-threads=0 -Djdk.reflect.useNativeAccessorOnly=true"

# Trains the AOT cache $2 (Java 25 and later) for the application jar $1 as the image trains its
# own (Dockerfile: 2 x 2,000 JSON calls to the CPU demo models, then SIGTERM), in the mode it then
# serves; the training's log to $3, model repository $4. Fails when no cache came of it.
train_aot_cache() {
  local jar="$1" cache="$2" log="$3" repo="$4"
  rm -f "$cache"
  # shellcheck disable=SC2086
  (cd "$(dirname "$jar")" && JAVA="$JAVA" APP_JAR="$jar" ETSERVE_MODEL_REPOSITORY="$repo" ETSERVE_NATIVE_LIBRARY_DIR="$STAGE" \
    ETSERVE_NATIVE_EXTRA_LIBRARIES="$PROBE" bash "$ROOT/scripts/aot-training.sh" "$log" 2000 \
    --enable-native-access=ALL-UNNAMED -XX:AOTCacheOutput="$cache" -Xlog:aot=off -Xlog:cds=off $IMAGE_JVM_OPTS) || true
  [[ -s "$cache" ]]
}

# Time to ready of the current application jar against ETSERVE_BASELINE_JAR on one host,
# interleaved (the same kind of host varies by more between leases than most start-up changes
# move it): the extracted jar as `java -jar` starts it, and as the image starts it, each jar with
# its own AOT cache trained as the image trains it; ETSERVE_AB_ROUNDS rounds (default 5). Needs
# Java 25 (AOT caches). Into $RESULTS/gpu-h200-startup-ab.txt.
startup_ab_bench() {
  local base="${ETSERVE_BASELINE_JAR:?ETSERVE_BASELINE_JAR: the baseline application jar}"
  local out="$RESULTS/gpu-h200-startup-ab.txt" repo="$WORK/service-repo" current="$JAR" st=0
  local which jar round
  declare -A plain=() cached=()
  cp "$base" "$WORK/app/baseline.jar"  # beside lib/, which its manifest's class path names
  make_repo "$repo" 4
  for which in baseline current; do
    jar="$current"; [[ $which == current ]] || jar="$WORK/app/baseline.jar"
    train_aot_cache "$jar" "$WORK/app/$which.aot" "$RESULTS/aot-training-$which.log" "$repo" \
      || { echo "training the $which jar's cache failed: $RESULTS/aot-training-$which.log" >&2; return 1; }
  done
  for round in $(seq 1 "${ETSERVE_AB_ROUNDS:-5}"); do
    for which in baseline current; do
      jar="$current"; [[ $which == current ]] || jar="$WORK/app/baseline.jar"
      JAR="$jar" start_service "$repo" --etserve.cuda.streams-per-device=4 || st=1
      plain[$which]+="$READY_MS "; stop_service
      JAR="$jar" JAVA_EXTRA="-XX:AOTCache=$WORK/app/$which.aot -Xlog:aot=off -Xlog:cds=off $IMAGE_JVM_OPTS" \
        start_service "$repo" --etserve.cuda.streams-per-device=4 || st=1
      cached[$which]+="$READY_MS "; stop_service
    done
  done
  {
    echo "# Time to ready, baseline against current, interleaved ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(nproc) cores, $("$JAVA" -version 2>&1 | head -1))"
    echo "baseline: $(basename "$base"); current: $current"; host_facts
    echo
    echo "| launch | jar | ms to ready, each round | median |"
    echo "|---|---|---|---|"
    for which in baseline current; do
      # shellcheck disable=SC2086
      echo "| extracted jar, as java -jar starts it | $which | ${plain[$which]% } | $(median ${plain[$which]}) |"
    done
    for which in baseline current; do
      # shellcheck disable=SC2086
      echo "| extracted jar + AOT cache, as the image starts it | $which | ${cached[$which]% } | $(median ${cached[$which]}) |"
    done
  } > "$out"
  cat "$out"
  return $st
}

# REST calls to a quick CPU model (the probe on a CPU instance per core, no kernel) for each set
# of service arguments in ETSERVE_SELECTOR_VARIANTS (';'-separated; "" = the defaults): whether
# calls on the selectors (etserve.http.inline-below, on by default with a selector per core;
# inline-alone-below) pay on this host against every call on a request thread; back to back,
# and for each pause in ETSERVE_SELECTOR_PAUSES_US (default "0": none) each client takes after
# each answer. ETSERVE_SELECTOR_GRPC=1: gRPC calls instead. ETSERVE_SELECTOR_KERNEL_US=N: GPU
# calls instead, the probe's N us kernel on 16 streams (32 instances). ETSERVE_SELECTOR_CLIENTS:
# the client counts (default "1 4 16 32").
# Into $RESULTS/gpu-h200-selectors.txt (gpu-h200-selectors-grpc.txt for gRPC).
selectors_bench() {
  local out="$RESULTS/gpu-h200-selectors.txt" st=0 v c pause label variants args repo="$WORK/selectors-repo" via=() what=REST
  local kernel="${ETSERVE_SELECTOR_KERNEL_US:-0}" model=probe-cpu calls="a quick CPU model" gpu_args=()
  if [[ -n ${ETSERVE_SELECTOR_GRPC:-} ]]; then via=(grpc-port="$GRPC"); what=gRPC; out="$RESULTS/gpu-h200-selectors-grpc.txt"; fi
  if [[ $kernel != 0 ]]; then model=probe; calls="the GPU probe ($kernel us kernel, 16 streams)"; gpu_args=(--etserve.cuda.streams-per-device=16); fi
  { echo "# $what calls to $calls by service arguments ($(nproc) cores)"
    [[ -z "${SERVICE_CPUS:-}" ]] \
      || echo "service pinned to CPUs $SERVICE_CPUS (taskset); the checks on the $(nproc) CPUs this step may use"
    echo; echo "$THR_HEADER"; } > "$out"
  local defaults=";--etserve.http.inline-below=0"
  [[ $what == REST ]] || defaults=";--etserve.grpc.inline-below=0"
  IFS=';' read -r -a variants <<< "${ETSERVE_SELECTOR_VARIANTS:-$defaults}"
  for v in "${variants[@]}"; do
    if [[ $kernel != 0 ]]; then
      make_repo "$repo" 32
    else
      rm -rf "$repo" && mkdir -p "$repo/probe-cpu/1"
      cp "$ROOT/src/test/resources/models/caller-stream-probe/1/model.pte" "$repo/probe-cpu/1/"
      printf 'inputs: [ { name: x } ]\noutputs: [ { name: observed } ]\ninstances: %s\n' "$(nproc)" > "$repo/probe-cpu/config.yml"
    fi
    read -r -a args <<< "$v"
    start_service "$repo" "${gpu_args[@]}" "${args[@]}"
    for pause in ${ETSERVE_SELECTOR_PAUSES_US:-0}; do
      label="${v:-(defaults)}"; [[ $pause == 0 ]] || label+=", clients pause $pause us"
      for c in ${ETSERVE_SELECTOR_CLIENTS:-1 4 16 32}; do
        check throughput port=$PORT "${via[@]}" model=$model spin=$kernel clients=$c seconds=4 pause-us="$pause" \
          pid=$SERVICE_PID label="$label" >> "$out" || st=1
      done
    done
    stop_service
  done
  end_table "$out" $st
}

# The packaged service: start table, throughput, dynamic batching, startup, first request,
# the sticky fault; all into $RESULTS/gpu-h200-service.txt.
service() {
  : "${JAVA:?}" "${JAR:?}" "${CHECK_CP:?}"
  cuda_env
  mkdir -p "$RESULTS"
  local out="$RESULTS/gpu-h200-service.txt" repo="$WORK/service-repo" status=0
  trap stop_service EXIT
  {
    echo "# The packaged service on the GPU ($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1))"
    echo "$JAR, GPU bridge from $STAGE, probe delegate as an extra library; $(nproc) cores"
    host_facts
    echo
    echo "| start | streams | wait | ms to ready | startup CPU s |"
    echo "|---|---|---|---|---|"
  } > "$out"
  : > "$RESULTS/check-stderr.txt"
  ROWS=()
  throughput_rows "$repo" "$out" || status=1
  local rows=("${ROWS[@]}")
  local batch_rows=()
  batching_bench "$repo" > "$RESULTS/batching-rows.txt" || status=1
  mapfile -t batch_rows < "$RESULTS/batching-rows.txt"
  # Time to ready on the demo models + the probe: the extracted jar, then with the ahead-of-time
  # cache from one training run (what the image ships).
  startup_bench "$repo" >> "$out" || status=1
  # The first request after ready, without and with `warmup: 2` on the GPU model.
  for warm in 0 2; do
    make_repo "$repo" 4
    [[ $warm == 0 ]] || printf 'warmup: %s\n' "$warm" >> "$repo/probe/config.yml"
    start_service "$repo" --etserve.cuda.streams-per-device=4
    rows+=("$(check first port=$PORT model=probe spin=2000 label="warmup $warm, ready after $READY_MS ms")") || status=1
    stop_service
  done
  # A sticky fault through REST: last, the CUDA context is unusable afterwards.
  make_repo "$repo" 2
  start_service "$repo" --etserve.cuda.streams-per-device=4
  echo "| K=4 (fault) | 4 | adaptive | $READY_MS | $STARTUP_CPU |" >> "$out"
  rows+=("$(check fault port=$PORT mgmt=$MGMT model=probe-fault cpu-model=demo-xnnpack)") || status=1
  stop_service
  rows+=("$(hung_work_fault "$repo")") || status=1
  {
    echo
    echo "Checks (health, handshake over REST and gRPC, sticky fault, SIGTERM):"
    echo
    printf '%s\n' "${rows[@]}" | grep -v '^| K=' || true
    echo
    echo "Throughput through REST, probe kernel on the leased stream (closed loop, loopback):"
    echo
    echo "$THR_HEADER"
    printf '%s\n' "${rows[@]}" | grep '^| K=' || true
    echo
    echo "Service CPU per call by thread kind (us; qtp: request threads, which run the forward call and its wait), then user and system time, minor faults and context switches per call:"
    echo
    grep '^\[cpu by thread\]' "$RESULTS/check-stderr.txt" || true
    echo
    echo "Dynamic batching, one stream and one instance, one-row requests, a 2 ms kernel per forward call:"
    echo
    echo "$BATCHING_HEADER"
    printf '%s\n' "${batch_rows[@]}"
  } >> "$out"
  cat "$out"
  trap - EXIT
  return $status
}
