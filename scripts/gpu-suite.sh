#!/usr/bin/env bash
# The GPU test suite, the GPU benchmark and the packaged service on a GPU, for a host with an
# NVIDIA GPU.
#
#   scripts/gpu-suite.sh run      from a checkout where `mvn verify` ran (Java + Maven here):
#                                 native, then junit, then service
#   scripts/gpu-suite.sh bundle   (on a build machine, after `mvn verify`) pack what a GPU host
#                                 without Java, Maven or network needs into three parts, each
#                                 small enough to travel beside the work tree in one transfer of
#                                 a remote runner (64 MiB; checked against 63 for a margin):
#                                   .device/stage1: JRE, ExecuTorch SDK, caller-stream library, JNI headers,
#                                                   JUnit console + AssertJ
#                                   .device/stage2: the extracted application jar (as in the image) with
#                                                   the libraries the in-process GPU tests need, the
#                                                   test classes
#                                   .device/stage3: the rest of the application's libraries (HTTP, gRPC, ...)
#   scripts/gpu-suite.sh stage1   on the GPU host: unpack stage1 into /tmp/etserve-gpu, build the
#                                 bridge and the probe delegate with CUDA, run the GPU ordering
#                                 check, the C++ tests, the completion-wait benchmark and the
#                                 linkage gate
#   scripts/gpu-suite.sh stage2   on the same host afterwards (/tmp/etserve-gpu kept): unpack
#                                 stage2, run the GPU JUnit suite, the sticky fault and the
#                                 in-process GPU benchmark
#   scripts/gpu-suite.sh stage3   then: unpack stage3 and run the packaged service (`service`)
#   scripts/gpu-suite.sh bundle-cuda SOURCE
#                                 (build machine) .device/cuda: the ExecuTorch source subset the CUDA
#                                 delegate builds from (SOURCE: an ExecuTorch checkout) and the
#                                 export's Python packages; travels with stage1
#   scripts/gpu-suite.sh cuda-stage1
#                                 on the GPU host, instead of stage1: unpack stage1, build the CUDA
#                                 delegate, the bridge and probe with it, the C++ GPU checks, then
#                                 export the real programs (scripts/export/export_cuda.py)
#   scripts/gpu-suite.sh cuda-programs
#                                 after cuda-stage1, stage2 (unpack) and stage3 (unpack): the real
#                                 programs through the packaged service (scripts/gpu-cuda-programs.sh)
#   scripts/gpu-suite.sh startup  time to ready: the extracted jar, with and without its AOT cache
#   scripts/gpu-suite.sh throughput|benchmark|batching|fault
#                                 after stage1 (and stage2, stage3 for the service), one step
#                                 alone: throughput and service CPU (by thread) through REST, the
#                                 in-process GPU benchmark, dynamic batching, the sticky fault
#   scripts/gpu-suite.sh unpack   unpack only the part this transfer carried (stage2 or stage3)
#   scripts/gpu-suite.sh jvm-options
#                                 service CPU per call for each JVM option set in
#                                 ETSERVE_JVM_VARIANTS (';'-separated), optionally pinned (SERVICE_CPUS)
#   scripts/gpu-suite.sh service  the application served on the GPU with the GPU bridge and the probe
#                                 delegate, checked over real HTTP and gRPC (health, handshake, throughput
#                                 for K = 1, 4, 16 streams at K and 2K clients, service CPU per
#                                 call, completion waits, sticky fault, SIGTERM, time to ready)
#
# ETSERVE_SKIP_BENCH=1 leaves out the two benchmarks of stage1 and stage2 (the bare-CUDA
# completion waits, the in-process GPU benchmark).
# Needs on the GPU host: the driver, a CUDA 13 toolkit (nvcc, libcudart), CMake >= 3.28, Ninja,
# gcc/g++, binutils and python3. Results go to $OUT (if set) or target/gpu-suite/.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUNDLE="$ROOT/.device"
WORK="${ETSERVE_GPU_WORK:-/tmp/etserve-gpu}"
RESULTS="${OUT:-$ROOT/target/gpu-suite}"
JUNIT_CONSOLE="org.junit.platform:junit-platform-console-standalone:6.0.3"
ASSERTJ="org.assertj:assertj-core:3.27.7"
# What the jlinked JRE needs to run Spring Boot on Jetty (java.desktop: java.beans).
JRE_MODULES="java.base,java.logging,java.management,java.naming,java.xml,java.sql,java.instrument,java.net.http,jdk.unsupported,jdk.crypto.ec,jdk.management,java.desktop"

log() { printf '[gpu-suite] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# xz where the host has it, Python's lzma where it does not.
unpack_xz() {
  local archive="$1" dest="$2"
  mkdir -p "$dest"
  if command -v xz >/dev/null; then tar -C "$dest" -xJf "$archive"
  else python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$archive" "$dest"; fi
}

bundle() {
  cd "$ROOT"
  local jar; jar="$(ls target/etserve-*.jar 2>/dev/null | grep -v -- '-plain' | head -1 || true)"
  [[ -n "$jar" && -d target/test-classes ]] || die "run mvn verify first (no target/etserve-*.jar or target/test-classes)"
  rm -rf "$BUNDLE" && mkdir -p "$BUNDLE/stage1" "$BUNDLE/stage2" "$BUNDLE/stage3"
  # The JRE is the one the image ships (25: AOT cache); the JDK that built the jar otherwise.
  local jdk; jdk="$(bash "$ROOT/scripts/java-home.sh")"
  [[ -n "$jdk" ]] || { jdk="$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")"; log "no JDK 25 here: the bundle's JRE is $jdk"; }

  log "stage1: ExecuTorch SDK, the caller-stream library and the JNI headers"
  local sp; sp="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  local jni="$BUNDLE/jni-tree"
  mkdir -p "$jni/jni/include/linux"
  cp "$jdk/include/jni.h" "$jni/jni/include/" && cp "$jdk/include/linux/jni_md.h" "$jni/jni/include/linux/"
  tar -cf - -C "$sp" executorch/lib executorch/include executorch/share \
      -C "$ROOT/.venv/caller-stream" libextension_cuda.so -C "$jni" jni \
    | xz -9 -T"$(nproc)" > "$BUNDLE/stage1/sdk.tar.xz"
  rm -rf "$jni"
  log "stage1: JRE ($jdk, jlink; xz over an uncompressed image is smaller than jlink's zip)"
  # --generate-cds-archive: the JDK's base CDS archive, which a dynamic (application) archive needs.
  "$jdk/bin/jlink" --add-modules "$JRE_MODULES" --strip-debug --no-man-pages --no-header-files \
    --generate-cds-archive --compress=zip-0 --output "$BUNDLE/jre" >/dev/null 2>&1 \
    || "$jdk/bin/jlink" --add-modules "$JRE_MODULES" --strip-debug --no-man-pages --no-header-files \
         --generate-cds-archive --compress=0 --output "$BUNDLE/jre"
  tar -C "$BUNDLE" -cf - jre | xz -9 -T"$(nproc)" > "$BUNDLE/stage1/jre.tar.xz"
  rm -rf "$BUNDLE/jre"

  log "stage2 and stage3: the extracted application jar and its libraries, the test classes"
  local app="$BUNDLE/app"
  rm -rf "$app" && mkdir -p "$app"
  (cd "$BUNDLE" && "$jdk/bin/java" -Djarmode=tools -jar "$ROOT/$jar" extract --destination "$app" >/dev/null) \
    || die "could not extract $jar"
  [[ -f "$app/$(basename "$jar")" ]] && mv "$app/$(basename "$jar")" "$app/etserve.jar"
  # The in-process GPU tests and benchmark need the runtime, CUDA and Spring's core only: the
  # server's libraries (HTTP, gRPC, protobuf, metrics export, JSON) go in stage3.
  local server_libs='^(grpc|netty|protobuf|proto-google|guava|failureaccess|jetty|jakarta|prometheus|spring-web|spring-boot-(jetty|web|actuator|micrometer|http)|jackson|perfmark|error_prone|animal|j2objc|annotations|gson|opentelemetry|micrometer-registry)'
  mkdir -p "$app/server-lib"
  for lib in "$app"/lib/*.jar; do
    [[ "$(basename "$lib")" =~ $server_libs ]] && mv "$lib" "$app/server-lib/"
  done
  tar -C "$app" -cf "$BUNDLE/stage2/app.tar" etserve.jar lib
  tar -C "$app" -cf "$BUNDLE/stage3/server-lib.tar" server-lib
  rm -rf "$app"
  # The test models are read from the work tree (src/test/resources), not from the classpath copy.
  tar -C target --exclude='test-classes/models' -cf - test-classes | xz -9 > "$BUNDLE/stage2/test-classes.tar.xz"
  # Plain `mvn` (not -o): the dependency plugin itself may not be in a fresh local repository.
  mvn -q -B dependency:copy -Dartifact="$JUNIT_CONSOLE" -DoutputDirectory="$BUNDLE/stage1" \
    || die "could not fetch $JUNIT_CONSOLE"
  mvn -q -B dependency:copy -Dartifact="$ASSERTJ" -DoutputDirectory="$BUNDLE/stage1" || die "could not fetch $ASSERTJ"
  du -sh "$BUNDLE"/stage*
  # One transfer carries the work tree (its tracked files) and one part: 64 MiB in all.
  local tree; tree="$(git ls-files -z | xargs -0 stat -c %s | awk '{n += $1} END {print n}')"
  local limit=$((63 * 1024 * 1024 - tree))
  for part in stage1 stage2 stage3; do
    local size; size="$(du -sb "$BUNDLE/$part" | cut -f1)"
    (( size < limit )) || die "$part is $size bytes: with the work tree ($tree bytes) over 63 MiB"
  done
}

# Paths of the GPU build, shared by the steps.
BUILD="$WORK/native-gpu"
STAGE="$WORK/native-gpu-stage/META-INF/etserve/native/linux-x86_64"
PROBE="$BUILD/testing/caller_stream_probe/libetserve_test_caller_stream_probe.so"
# What the in-process GPU tests and the benchmark need to find the GPU build and the probe.
GPU_TEST_PROPS=(-Detserve.native.library-dir="$STAGE" -Detserve.test.probe-delegate="$PROBE"
  -Detserve.test.native-build-dir="$BUILD" --enable-native-access=ALL-UNNAMED)

cuda_env() {
  export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
  export LD_LIBRARY_PATH="$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}"
}

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

unpack_stage1() {
  [[ -d "$BUNDLE/stage1" ]] || die "no $BUNDLE/stage1: run 'scripts/gpu-suite.sh bundle' on a build machine"
  rm -rf "$WORK" && mkdir -p "$WORK"
  log "unpacking stage1 into $WORK"
  unpack_xz "$BUNDLE/stage1/jre.tar.xz" "$WORK"
  unpack_xz "$BUNDLE/stage1/sdk.tar.xz" "$WORK"
  cp "$BUNDLE"/stage1/*.jar "$WORK/"  # the JUnit console and AssertJ, for stage2
  export JAVA_HOME="$WORK/jni"
}

stage1() {
  unpack_stage1
  native_suite "$WORK/executorch" "$WORK/libextension_cuda.so"
}

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

# Unpacks the parts of the application this transfer carried into $WORK/app (kept between
# calls on one host): stage2 (the jar, its core libraries, the test classes), stage3 (the
# server's libraries). Sets JAVA, JAR and CHECK_CP.
unpack_app() {
  local app="$WORK/app"
  mkdir -p "$app"
  if [[ -f "$BUNDLE/stage2/app.tar" ]]; then
    rm -rf "$app/etserve.jar" "$app/lib" && tar -C "$app" -xf "$BUNDLE/stage2/app.tar"
    unpack_xz "$BUNDLE/stage2/test-classes.tar.xz" "$WORK"
  fi
  if [[ -f "$BUNDLE/stage3/server-lib.tar" ]]; then
    rm -rf "$app/server-lib" && tar -C "$app" -xf "$BUNDLE/stage3/server-lib.tar"
    mv "$app"/server-lib/*.jar "$app/lib/" 2>/dev/null || die "stage3 before stage2: run stage2 on this host first"
  fi
  [[ -f "$app/etserve.jar" ]] || die "no application in $WORK: run stage2 on this host first"
  JAVA="$WORK/jre/bin/java" JAR="$app/etserve.jar"
  CHECK_CP="$app/etserve.jar:$WORK/test-classes:$(ls "$app"/lib/*.jar | tr '\n' ':')$(ls "$WORK"/assertj-core-*.jar)"
}

# The server's libraries are there (stage3 unpacked).
have_server() { ls "$WORK"/app/lib/jetty-server-*.jar >/dev/null 2>&1 || die "no server libraries in $WORK: run stage3 on this host first"; }

stage2() {
  [[ -f "$STAGE/libetserve_jni.so" ]] || die "no GPU build in $WORK: run stage1 on this host first (same machine)"
  [[ -f "$BUNDLE/stage2/app.tar" ]] || die "no $BUNDLE/stage2: run 'scripts/gpu-suite.sh bundle' on a build machine"
  unpack_app
  junit_suite "$JAVA" "$CHECK_CP" "$(ls "$WORK"/junit-platform-console-standalone-*.jar)"
}

stage3() {
  [[ -f "$BUNDLE/stage3/server-lib.tar" ]] || die "no $BUNDLE/stage3: run 'scripts/gpu-suite.sh bundle' on a build machine"
  unpack_app
  have_server
  service
}

# --- the packaged service on the GPU -------------------------------------------------------

SERVICE_PID=""
PORT=18080
MGMT=18081
GRPC=18001

# Starts the application ($JAR: the extracted jar, or a fat jar) and waits for readiness: sets
# SERVICE_PID, READY_MS (process start to readiness 200) and STARTUP_CPU (CPU-seconds the process
# used until then).
READY_MS=""
STARTUP_CPU=""
start_service() {
  local repo="$1"; shift
  local log="$RESULTS/service-$(date +%s%N).log"
  local t0; t0="$(date +%s%N)"
  # shellcheck disable=SC2086
  # SERVICE_CPUS: the service's CPU list (taskset), e.g. 0-3; the checks stay unpinned.
  ${SERVICE_CPUS:+taskset -c "$SERVICE_CPUS"} "$JAVA" --enable-native-access=ALL-UNNAMED ${JAVA_EXTRA:-} -jar "$JAR" \
    --server.port=$PORT --management.server.port=$MGMT --etserve.grpc.port=$GRPC --etserve.model-repository="$repo" \
    --etserve.native.library-dir="$STAGE" --etserve.native.extra-libraries="$PROBE" "$@" >"$log" 2>&1 &
  SERVICE_PID=$!
  local code=000
  for _ in $(seq 1 3000); do
    # bash's /dev/tcp: polling must not cost the starting JVM CPU (a python or curl per poll would)
    code="$( (exec 3<>"/dev/tcp/127.0.0.1/$MGMT" && printf 'GET /actuator/health/readiness HTTP/1.0\r\n\r\n' >&3 \
      && read -r _ c _ <&3 && echo "$c") 2>/dev/null || echo 000)"
    [[ "$code" == 200 ]] && break
    kill -0 "$SERVICE_PID" 2>/dev/null || { tail -30 "$log" >&2; die "the service exited during startup"; }
    sleep 0.02
  done
  [[ "$code" == 200 ]] || { tail -30 "$log" >&2; die "the service did not become ready"; }
  local t1; t1="$(date +%s%N)"
  local ticks; ticks="$(awk '{print $14 + $15}' "/proc/$SERVICE_PID/stat")"
  READY_MS=$(( (t1 - t0) / 1000000 ))
  STARTUP_CPU="$(awk -v t="$ticks" 'BEGIN{printf "%.1f", t/100}')"
}

stop_service() {
  [[ -n "$SERVICE_PID" ]] || return 0
  kill -TERM "$SERVICE_PID" 2>/dev/null || true
  for _ in $(seq 1 300); do kill -0 "$SERVICE_PID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$SERVICE_PID" 2>/dev/null || true
  wait "$SERVICE_PID" 2>/dev/null || true
  SERVICE_PID=""
}

# The check's stderr is kept too: the throughput checks write CPU per call by thread kind there.
check() { "$JAVA" -cp "$CHECK_CP" io.etserve.bench.GpuServiceCheck "$@" 2> >(tee -a "$RESULTS/check-stderr.txt" >&2); }

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }

# Three starts each: the fat jar (where there is one: FAT_JAR), the extracted jar, and the
# extracted jar with the ahead-of-time cache the image uses (Java 25: -XX:AOTCacheOutput, else a
# CDS archive), made by a training run that exits after the context refresh.
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
  ms=() cpu=()
  for _ in 1 2 3; do
    start_service "$repo" --etserve.cuda.streams-per-device=4
    ms+=("$READY_MS"); cpu+=("$STARTUP_CPU"); stop_service
  done
  echo "| extracted jar (java -Djarmode=tools -jar etserve.jar extract) | $(median "${ms[@]}") | $(median "${cpu[@]}") |"
  local feature train use what
  feature="$("$JAVA" -XshowSettings:properties -version 2>&1 | awk -F' = ' '/java.specification.version/ {print $2; exit}')"
  if (( feature >= 25 )); then
    train="-XX:AOTCacheOutput=app.aot -Xlog:aot=off -Xlog:cds=off"; use="-XX:AOTCache=$extracted/app.aot -Xlog:aot=off -Xlog:cds=off"; what="AOT cache"
  else
    train="-XX:ArchiveClassesAtExit=app.jsa -Xlog:cds=off"; use="-XX:SharedArchiveFile=$extracted/app.jsa -Xlog:cds=off"; what="CDS archive"
  fi
  # shellcheck disable=SC2086
  (cd "$extracted" && "$JAVA" --enable-native-access=ALL-UNNAMED $train \
    -Dspring.context.exit=onRefresh -jar "$JAR" --server.port=0 --management.server.port=0 --etserve.grpc.port=0 \
    --etserve.model-repository="$repo" --etserve.native.library-dir="$STAGE" \
    --etserve.native.extra-libraries="$PROBE" >"$RESULTS/aot-training.log" 2>&1) || true
  if [[ ! -s "$extracted/app.aot" && ! -s "$extracted/app.jsa" ]]; then
    echo "| extracted jar + $what | training run failed: $RESULTS/aot-training.log | - |"
    JAR="$jar_saved"; return 1
  fi
  ms=() cpu=()
  for _ in 1 2 3; do
    JAVA_EXTRA="$use" start_service "$repo" --etserve.cuda.streams-per-device=4
    ms+=("$READY_MS"); cpu+=("$STARTUP_CPU"); stop_service
  done
  echo "| extracted jar + $what (as in the image) | $(median "${ms[@]}") | $(median "${cpu[@]}") |"
  # The same without starting CUDA beside the context (etserve.cuda.early-start): what it saves.
  ms=() cpu=()
  for _ in 1 2 3; do
    JAVA_EXTRA="$use" start_service "$repo" --etserve.cuda.streams-per-device=4 --etserve.cuda.early-start=false
    ms+=("$READY_MS"); cpu+=("$STARTUP_CPU"); stop_service
  done
  echo "| extracted jar + $what, CUDA started inside the context (early-start=false) | $(median "${ms[@]}") | $(median "${cpu[@]}") |"
  JAR="$jar_saved"
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

# The probe as a GPU model with `instances` Modules, plus the two demo models (CPU programs).
make_repo() {
  local repo="$1" instances="$2"
  rm -rf "$repo" && mkdir -p "$repo"
  for name in probe probe-fault; do
    mkdir -p "$repo/$name/1"
    cp "$ROOT/src/test/resources/models/caller-stream-probe/1/model.pte" "$repo/$name/1/"
    printf 'inputs: [ { name: x } ]\noutputs: [ { name: observed } ]\nplacement: gpu\ninstances: %s\n' \
      "$instances" > "$repo/$name/config.yml"
  done
  cp -r "$ROOT/models/demo-xnnpack" "$ROOT/models/demo-portable" "$repo/"
}

# What decides how much a thread pays for waking on this host: the clock source (a clock read
# that is a system call costs every timestamp), the idle driver and the mitigations.
host_facts() {
  echo "host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'); clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo '?'); cpuidle $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo none)/$(cat /sys/devices/system/cpu/cpuidle/current_governor_ro /sys/devices/system/cpu/cpuidle/current_governor 2>/dev/null | head -1 || echo -) ($(cat /sys/devices/system/cpu/cpu0/cpuidle/state*/name 2>/dev/null | tr '\n' ' ' || true)); THP $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo '?')"
}

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
  { echo; grep '^\[cpu by thread\]' "$RESULTS/check-stderr.txt" || true; } >> "$out"
  cat "$out"
  return $st
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

# Real CUDA-backend programs (ExecuTorch's CUDA delegate built from source, exported models).
# shellcheck source=scripts/gpu-cuda-programs.sh
source "$ROOT/scripts/gpu-cuda-programs.sh"

run() {
  cd "$ROOT"
  local sdk; sdk="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/executorch"
  local status=0
  mkdir -p "$WORK"
  native_suite "$sdk" "$ROOT/.venv/caller-stream/libextension_cuda.so" || status=1
  mvn -q -B dependency:build-classpath -Dmdep.includeScope=test -Dmdep.outputFile=target/gpu-cp.txt >/dev/null \
    || die "mvn dependency:build-classpath failed"
  mvn -q -B dependency:copy -Dartifact="$JUNIT_CONSOLE" -DoutputDirectory=target/gpu-jars >/dev/null \
    || die "could not fetch $JUNIT_CONSOLE"
  local cp="target/classes:target/test-classes:$(cat target/gpu-cp.txt)"
  junit_suite java "$cp" "$(ls target/gpu-jars/junit-platform-console-standalone-*.jar)" || status=1
  local jar; jar="$(ls target/etserve-*.jar | grep -v -- '-plain' | head -1)"
  JAVA=java JAR="$jar" FAT_JAR="$jar" CHECK_CP="$cp" service || status=1
  return $status
}

case "${1:-run}" in
  run) run ;;
  bundle) bundle ;;
  bundle-cuda) cuda_bundle "${2:-${ETSERVE_EXECUTORCH_SOURCE:-}}" ;;
  cuda-stage1) unpack_stage1; cuda_stage1 ;;
  cuda-export) cuda_export "${2:-blob}" ;;
  cuda-programs)
    # After cuda-stage1, stage2 and stage3 on this host.
    unpack_app; have_server; JAVA="${JAVA:-$WORK/jre/bin/java}" cuda_programs ;;
  cuda-latency)
    # After cuda-stage1, stage2 and stage3: batch-1 latency and CPU of the exported models (or those named).
    unpack_app; have_server; shift; JAVA="${JAVA:-$WORK/jre/bin/java}" cuda_latency "$@" ;;
  service)
    # After stage2 + stage3 (or `run`, which passes JAVA, JAR and CHECK_CP) on this host.
    if [[ -z "${JAR:-}" || -z "${CHECK_CP:-}" ]]; then unpack_app; have_server; fi
    JAVA="${JAVA:-$WORK/jre/bin/java}" service ;;
  stage1) stage1 ;;
  stage2) stage2 ;;
  stage3) stage3 ;;
  unpack) unpack_app ;;  # only unpack the part this transfer carried (stage2 or stage3)
  batching|fault|throughput|benchmark|startup|jvm-options)
    # After stage1 on this host (and stage2, plus stage3 for all but the benchmark), one step
    # alone, without the JUnit suite: the dynamic-batching step, the sticky fault through REST,
    # the throughput and service-CPU step (K = 1, 4, 16, the spinning wait beside, then
    # batching), the in-process GPU benchmark, time to ready, or JVM option sets compared; the
    # output goes to $RESULTS/gpu-h200-<step>.txt.
    unpack_app
    [[ $1 == benchmark ]] || have_server
    cuda_env; mkdir -p "$RESULTS"; : > "$RESULTS/check-stderr.txt"; trap stop_service EXIT
    case $1 in
      jvm-options) jvm_options_bench; exit $? ;;
      batching)
        { echo "$BATCHING_HEADER"; batching_bench "$WORK/service-repo"; } | tee "$RESULTS/gpu-h200-batching.txt" ;;
      fault)
        make_repo "$WORK/service-repo" 2
        start_service "$WORK/service-repo" --etserve.cuda.streams-per-device=4
        check fault port=$PORT mgmt=$MGMT model=probe-fault cpu-model=demo-xnnpack | tee "$RESULTS/gpu-h200-fault.txt"
        stop_service ;;
      benchmark) gpu_benchmark "$JAVA" "$CHECK_CP" | tee -a "$RESULTS/gpu-h200-benchmark.txt" ;;
      startup)
        make_repo "$WORK/service-repo" 4
        startup_bench "$WORK/service-repo" | tee "$RESULTS/gpu-h200-startup.txt" ;;
      throughput)
        out="$RESULTS/gpu-h200-throughput.txt"
        { echo "# Throughput and service CPU through REST ($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) cores)"
          host_facts; echo; echo "| start | streams | wait | ms to ready | startup CPU s |"; echo "|---|---|---|---|---|"; } > "$out"
        ROWS=(); st=0
        throughput_rows "$WORK/service-repo" "$out" || st=1
        batching_bench "$WORK/service-repo" > "$RESULTS/batching-rows.txt" || st=1
        { echo; printf '%s\n' "${ROWS[@]}" | grep -v '^| K=' || true
          echo; echo "$THR_HEADER"; printf '%s\n' "${ROWS[@]}" | grep '^| K=' || true
          echo; echo "Dynamic batching, one stream and one instance, one-row requests, a 2 ms kernel per forward call:"
          echo; echo "$BATCHING_HEADER"; cat "$RESULTS/batching-rows.txt"
          echo; echo "Service CPU per call by thread kind (us; qtp: request threads, which run the forward call and its wait), then user and system time, minor faults and context switches per call:"
          echo; sleep 1; grep '^\[cpu by thread\]' "$RESULTS/check-stderr.txt" || true; } >> "$out"
        cat "$out"; exit $st ;;
    esac ;;
  *) echo "usage: scripts/gpu-suite.sh run|bundle|bundle-cuda SOURCE|stage1|cuda-stage1|cuda-export|stage2|stage3|service|cuda-programs|startup|batching|fault|throughput|benchmark|unpack|jvm-options" >&2; exit 2 ;;
esac
