#!/usr/bin/env bash
# The GPU test suite and the GPU benchmark, for a host with an NVIDIA GPU.
#
#   scripts/gpu-suite.sh run      build the bridge and the probe delegate with CUDA, then run
#                                 the GPU ordering check (C++), the linkage gate, the GPU JUnit
#                                 suite (tag "gpu") and the GPU benchmark
#   scripts/gpu-suite.sh bundle   (on a build machine, after `mvn verify`) pack what `run` needs
#                                 into .device/ for a GPU host without Maven or network: a jlinked
#                                 JRE, the test classpath and the ExecuTorch SDK from .venv
#
# Needs on the GPU host: the driver, a CUDA 13 toolkit (nvcc, libcudart), CMake >= 3.28, Ninja,
# gcc/g++ and binutils; Java 17+ unless the bundle is there. Results go to $OUT (if set) or
# target/gpu-suite/.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUNDLE="$ROOT/.device"
RESULTS="${OUT:-$ROOT/target/gpu-suite}"
JUNIT_CONSOLE="org.junit.platform:junit-platform-console-standalone:6.0.3"

log() { printf '[gpu-suite] %s\n' "$*" >&2; }

bundle() {
  cd "$ROOT"
  rm -rf "$BUNDLE" && mkdir -p "$BUNDLE/jars"
  [[ -d target/test-classes && -d target/classes ]] || { log "run mvn verify (or test-compile) first"; exit 1; }
  log "test classpath"
  mvn -q -o dependency:build-classpath -Dmdep.includeScope=test -Dmdep.outputFile="$BUNDLE/cp.txt" >/dev/null
  # Only what the GPU suite loads: the runtime binding, CUDA via JavaCPP, Spring's health types, JUnit.
  tr ':' '\n' < "$BUNDLE/cp.txt" | grep -E '/(javacpp|cuda|tensorrt|spring-boot-health|spring-core|spring-jcl|spring-boot|spring-context|spring-beans|spring-aop|spring-expression|micrometer-observation|micrometer-commons|assertj-core|slf4j-api)-[0-9]' \
    | grep -v -- '-sources' | xargs -I{} cp {} "$BUNDLE/jars/"
  mvn -q dependency:copy -Dartifact="$JUNIT_CONSOLE" -DoutputDirectory="$BUNDLE/jars" >/dev/null
  rm "$BUNDLE/cp.txt"
  mkdir -p "$BUNDLE/classes" "$BUNDLE/test-classes"
  cp -r target/classes/io "$BUNDLE/classes/" && cp -r target/test-classes/io "$BUNDLE/test-classes/"
  log "ExecuTorch SDK (lib, include, share) and the caller-stream library"
  local sp; sp="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  mkdir -p "$BUNDLE/sdk"
  tar -C "$sp" -czf "$BUNDLE/sdk/executorch.tgz" executorch/lib executorch/include executorch/share
  cp .venv/caller-stream/libextension_cuda.so "$BUNDLE/sdk/"
  log "JRE (jlink) and the JNI headers the bridge compiles against"
  local jdk; jdk="$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")"
  mkdir -p "$BUNDLE/jni/include/linux"
  cp "$jdk/include/jni.h" "$BUNDLE/jni/include/" && cp "$jdk/include/linux/jni_md.h" "$BUNDLE/jni/include/linux/"
  "$jdk/bin/jlink" --add-modules java.base,java.logging,java.management,java.naming,jdk.unsupported \
    --strip-debug --no-man-pages --no-header-files --compress=2 --output "$BUNDLE/jre-image"
  tar -C "$BUNDLE" -czf "$BUNDLE/jre.tgz" jre-image && rm -rf "$BUNDLE/jre-image"
  du -sh "$BUNDLE"
}

run() {
  cd "$ROOT"
  mkdir -p "$RESULTS"
  local java=java cp sdk caller_stream
  if [[ -d "$BUNDLE/jars" ]]; then
    log "using the bundle in $BUNDLE"
    mkdir -p /tmp/etserve-gpu && tar -C /tmp/etserve-gpu -xzf "$BUNDLE/jre.tgz" && tar -C /tmp/etserve-gpu -xzf "$BUNDLE/sdk/executorch.tgz"
    java=/tmp/etserve-gpu/jre-image/bin/java
    export JAVA_HOME="$BUNDLE/jni"
    sdk=/tmp/etserve-gpu/executorch
    caller_stream="$BUNDLE/sdk/libextension_cuda.so"
    cp="$BUNDLE/classes:$BUNDLE/test-classes:$(ls "$BUNDLE"/jars/*.jar | grep -v console-standalone | tr '\n' ':')"
  else
    sdk="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/executorch"
    caller_stream="$ROOT/.venv/caller-stream/libextension_cuda.so"
    mvn -q dependency:build-classpath -Dmdep.includeScope=test -Dmdep.outputFile=target/gpu-cp.txt >/dev/null
    mvn -q dependency:copy -Dartifact="$JUNIT_CONSOLE" -DoutputDirectory=target/gpu-jars >/dev/null
    cp="target/classes:target/test-classes:$(cat target/gpu-cp.txt)"
  fi
  local console
  console="$( (ls "$BUNDLE"/jars/junit-platform-console-standalone-*.jar target/gpu-jars/junit-platform-console-standalone-*.jar 2>/dev/null || true) | head -1)"
  export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}" LD_LIBRARY_PATH="${CUDA_HOME:-/usr/local/cuda}/lib64:${LD_LIBRARY_PATH:-}"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$RESULTS/gpu.txt" || true

  log "native build with CUDA"
  local build="$ROOT/target/native-gpu" stage_root="$ROOT/target/native-gpu-stage"
  ETSERVE_EXECUTORCH_DIR="$sdk" ETSERVE_CALLER_STREAM_LIBRARY="$caller_stream" ETSERVE_NATIVE_BUILD_DIR="$build" \
    ETSERVE_NATIVE_STAGE_DIR="$stage_root" ETSERVE_NATIVE_JOBS="$(nproc)" bash native/build.sh build 2>&1 | tail -5
  local stage="$stage_root/META-INF/etserve/native/linux-x86_64"
  local probe="$build/testing/caller_stream_probe/libetserve_test_caller_stream_probe.so"
  local status=0

  log "GPU ordering check and C++ tests"
  ctest --test-dir "$build" --output-on-failure -R '^gpu\.' 2>&1 | tee "$RESULTS/ctest-gpu.txt" || status=1
  if [[ -x "$build/tests/etserve_native_tests" ]]; then
    timeout 120 "$build/tests/etserve_native_tests" 2>&1 | tail -3 | tee -a "$RESULTS/ctest-gpu.txt" || status=1
  fi
  log "linkage gate on the GPU build"
  { bash native/scripts/check-linkage.sh --bridge "$build/libetserve_jni.so" && \
    bash native/scripts/check-linkage.sh --dir "$stage"; } 2>&1 | tee "$RESULTS/linkage-gpu.txt" || status=1

  local props=(-Detserve.native.library-dir="$stage" -Detserve.test.probe-delegate="$probe" \
    -Detserve.test.native-build-dir="$build" --enable-native-access=ALL-UNNAMED)
  log "GPU JUnit suite"
  timeout 300 "$java" "${props[@]}" -jar "$console" execute --class-path "$cp" --select-package io.etserve.gpu \
    --include-tag gpu --details=tree --disable-banner 2>&1 | tee "$RESULTS/junit-gpu.txt" || status=1
  log "GPU sticky-fault test (own JVM, last: it leaves the CUDA context unusable)"
  timeout 120 "$java" "${props[@]}" -jar "$console" execute --class-path "$cp" --select-package io.etserve.gpu \
    --include-tag gpu-fault --details=tree --disable-banner 2>&1 | tee "$RESULTS/junit-gpu-fault.txt" || status=1
  log "GPU benchmark"
  timeout 240 "$java" "${props[@]}" -cp "$cp" io.etserve.gpu.GpuStreamBenchmark "${ETSERVE_BENCH_SPIN_US:-2000}" \
    "${ETSERVE_BENCH_SECONDS:-3}" "${ETSERVE_BENCH_CALLS:-20000}" 2>&1 | tee "$RESULTS/benchmark-gpu.txt" || status=1
  return $status
}

case "${1:-run}" in
  run) run ;;
  bundle) bundle ;;
  *) echo "usage: scripts/gpu-suite.sh run|bundle" >&2; exit 2 ;;
esac
