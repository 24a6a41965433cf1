#!/usr/bin/env bash
# The GPU suite for a host with an NVIDIA GPU: what only a GPU can check, by what it tests.
#
# What it tests (each step's functions live in scripts/gpu/<file>):
#   native (native.sh)        the bridge and the test-only probe delegate built with CUDA; the GPU
#                             ordering check (a delegate's kernel on the leased stream must follow
#                             the caller's work), the C++ tests, the completion waits on bare CUDA,
#                             the linkage gate (one libextension_cuda.so)
#   junit (junit.sh)          the JUnit `gpu` suite on real streams, a sticky fault in its own JVM,
#                             the in-process GPU benchmark
#   service (service.sh)      the packaged service on the GPU over REST and gRPC: health, the
#                             stream handshake at K = 1, 4, 16, throughput and service CPU per call,
#                             dynamic batching, time to ready, the sticky fault, SIGTERM
#   cuda-programs, cuda-latency (cuda-programs.sh)
#                             real programs of ExecuTorch's CUDA backend (the delegate built from an
#                             ExecuTorch tree, exported on the host with PyTorch references) through
#                             the packaged service: answers, one stream across real delegates,
#                             device memory, faults; batch-1 latency and CPU per call
#   cuda-profile (cuda-profile.sh)
#                             where the service's CPU per call goes with a real program (a JFR
#                             recording over a steady load: Java and native samples, the JIT)
#   data-path (data-path.sh)  4 MiB tensors in and out through REST and gRPC against a bare
#                             echo of the same bytes (bench/data-path.sh with the bundle); and
#                             cpu-threadpool: a small CPU model on ExecuTorch's CPU threadpool and
#                             off it (bench/cpu-threadpool.sh with the bundle)
#   cuda-shm (cuda-shm.sh)    Triton's CUDA shared memory through the packaged service, with
#                             Triton's own Python client over REST and gRPC: answers against the
#                             PyTorch references, status and unregister by kind, the refusals,
#                             concurrent requests on one region; and pa-cuda-shm: Triton's
#                             perf_analyzer with its tensors in the request, in system and in
#                             CUDA shared memory (needs bundle-perf-analyzer's transfer)
#
# Commands:
#   scripts/gpu-suite.sh run            from a checkout where `mvn verify` ran (Java + Maven on
#                                       the host): native, junit, then service
#   scripts/gpu-suite.sh startup|throughput|benchmark|batching|fault|jvm-options|selectors|ab|startup-ab|jit|data-path|cpu-threadpool|cuda-shm|pa-cuda-shm
#                                       one service or benchmark step alone (after the stages
#                                       below on this host); jvm-options compares the option sets
#                                       in ETSERVE_JVM_VARIANTS (';'-separated), optionally pinned
#                                       (SERVICE_CPUS)
#                                       selectors: REST calls to a quick CPU model with the service
#                                       arguments in ETSERVE_SELECTOR_VARIANTS (';'-separated),
#                                       each client pausing ETSERVE_SELECTOR_PAUSES_US (a list);
#                                       default variants: the defaults against
#                                       etserve.http.inline-below=0; ETSERVE_SELECTOR_GRPC=1: gRPC
#                                       calls instead (the defaults against etserve.grpc.inline-below=0);
#                                       ETSERVE_SELECTOR_KERNEL_US=N: the GPU probe's N us kernel on
#                                       16 streams instead of the CPU model; ETSERVE_SELECTOR_CLIENTS:
#                                       the client counts (default "1 4 16 32")
#                                       ab: the current jar against ETSERVE_BASELINE_JAR (an
#                                       application jar of another commit, same dependencies),
#                                       interleaved on this host, the REST rows of the CPU goals
#                                       (ETSERVE_BASELINE_JAR unset: the current jar on both sides,
#                                       ETSERVE_AB_BASELINE_ARGS / ETSERVE_AB_CURRENT_ARGS apart;
#                                       ETSERVE_AB_GRPC=1: gRPC rows too; ETSERVE_AB_LEARN: seconds
#                                       of each row's own kernel before it is timed, default 1;
#                                       ETSERVE_AB_GRPC_DEADLINE: whole seconds of a deadline on
#                                       each gRPC call, default none);
#                                       startup-ab: the two jars' time to ready, as `java -jar`
#                                       and as the image start them; jit: what the JIT compiles
#                                       during the K = 4 rows (JFR and PrintCompilation, REST and
#                                       gRPC; ETSERVE_AB_JIT_JFR=0: without JFR)
#                                       data-path: the large-tensor rows (knobs in
#                                       scripts/gpu/data-path.sh; SERVICE_CPUS pins the service
#                                       and the echo); cpu-threadpool: demo-xnnpack with and
#                                       without the pool (SERVICE_CPUS pins both services)
#   scripts/gpu-suite.sh cuda-latency [MODEL...]
#                                       batch-1 latency of the exported CUDA models
#   scripts/gpu-suite.sh cuda-profile [MODEL...]
#                                       the service's CPU per call of one exported model, profiled
#
# A host without Java, Maven or network (transfer.sh): build here, carry three parts there, one
# per transfer (each fits beside the work tree in 64 MiB), and run a stage after each:
#   scripts/gpu-suite.sh bundle         here, after `mvn verify`: .device/stage1 (JRE, ExecuTorch SDK,
#                                       caller-stream library, JNI headers, JUnit console), stage2 (the
#                                       extracted jar and the libraries the in-process tests need, the
#                                       test classes), stage3 (the server's libraries, a bench program)
#   scripts/gpu-suite.sh bundle-clients here: .device/clients, the wheels of Triton's Python clients
#                                       (with cuda-python) for the cuda-shm step, a transfer of its own
#   scripts/gpu-suite.sh bundle-baseline COMMIT
#                                       here, after bundle: .device/stage3/base/etserve.jar, COMMIT's
#                                       application jar, for data-path's ETSERVE_DATA_PATH_BASELINE_JAR
#   scripts/gpu-suite.sh bundle-perf-analyzer
#                                       here: .device/perf-analyzer, perf_analyzer's wheel for the
#                                       pa-cuda-shm step (7 MB: alone, or beside stage2)
#   scripts/gpu-suite.sh bundle-cuda SOURCE
#                                       here: .device/cuda, the ExecuTorch tree's subset the CUDA
#                                       delegate builds from, and the export's Python packages
#   scripts/gpu-suite.sh stage1         there: unpack stage1 into /tmp/etserve-gpu, then native
#   scripts/gpu-suite.sh cuda-stage1    there, instead of stage1: also the CUDA delegate, and the
#                                       export in the background (CUDA_EXPORT_ARGS: its options)
#   scripts/gpu-suite.sh stage2         there afterwards: unpack stage2, then junit
#   scripts/gpu-suite.sh stage3         then: unpack stage3, then service
#   scripts/gpu-suite.sh unpack         unpack only the part this transfer carried (stage2 or stage3),
#                                       before a single step or cuda-programs
#
# ETSERVE_SKIP_BENCH=1 leaves out the two benchmarks of native and junit (the bare-CUDA completion
# waits, the in-process GPU benchmark).
# Needs on the GPU host: the driver, a CUDA 13 toolkit (nvcc, libcudart), CMake >= 3.28, Ninja,
# gcc/g++, binutils and python3. Results go to $OUT (if set) or target/gpu-suite/.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUNDLE="$ROOT/.device"
WORK="${ETSERVE_GPU_WORK:-/tmp/etserve-gpu}"
RESULTS="${OUT:-$ROOT/target/gpu-suite}"
GPU_SCRIPTS="$ROOT/scripts/gpu"
# shellcheck source=scripts/gpu/common.sh
source "$GPU_SCRIPTS/common.sh"
# shellcheck source=scripts/gpu/transfer.sh
source "$GPU_SCRIPTS/transfer.sh"
# shellcheck source=scripts/gpu/native.sh
source "$GPU_SCRIPTS/native.sh"
# shellcheck source=scripts/gpu/junit.sh
source "$GPU_SCRIPTS/junit.sh"
# shellcheck source=scripts/gpu/service.sh
source "$GPU_SCRIPTS/service.sh"
# shellcheck source=scripts/gpu/cuda-programs.sh
source "$GPU_SCRIPTS/cuda-programs.sh"
# shellcheck source=scripts/gpu/cuda-profile.sh
source "$GPU_SCRIPTS/cuda-profile.sh"
# shellcheck source=scripts/gpu/data-path.sh
source "$GPU_SCRIPTS/data-path.sh"
# shellcheck source=scripts/gpu/cuda-shm.sh
source "$GPU_SCRIPTS/cuda-shm.sh"

stage1() {
  unpack_stage1
  native_suite "$WORK/executorch" "$WORK/libextension_cuda.so"
}

stage2() {
  [[ -f "$STAGE/libetserve_jni.so" ]] || die "no GPU build in $WORK: run stage1 on this host first (same machine)"
  [[ -f "$BUNDLE/stage2/app.tar" ]] || die "no $BUNDLE/stage2: run 'scripts/gpu-suite.sh bundle' on a build machine"
  unpack_app
  cuda_export_settle
  junit_suite "$JAVA" "$CHECK_CP" "$(ls "$WORK"/junit-platform-console-standalone-*.jar)"
}

stage3() {
  [[ -f "$BUNDLE/stage3/server-lib.tar" ]] || die "no $BUNDLE/stage3: run 'scripts/gpu-suite.sh bundle' on a build machine"
  unpack_app
  have_server
  cuda_export_settle
  service
}

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
  bundle-clients) bundle_clients ;;
  bundle-perf-analyzer) bundle_perf_analyzer ;;
  bundle-baseline) bundle_baseline "${2:-}" ;;
  cuda-stage1) unpack_stage1; cuda_stage1 ;;
  cuda-export) cuda_export "${2:-blob}" ;;
  cuda-programs)
    # After cuda-stage1, stage2 and stage3 on this host.
    unpack_app; have_server; JAVA="${JAVA:-$WORK/jre/bin/java}" cuda_programs ;;
  cuda-latency)
    # After cuda-stage1, stage2 and stage3: batch-1 latency and CPU of the exported models (or those named).
    unpack_app; have_server; shift; JAVA="${JAVA:-$WORK/jre/bin/java}" cuda_latency "$@" ;;
  cuda-profile)
    # After cuda-stage1, stage2 and stage3: a JFR profile of the service under load (default: ResNet-18).
    unpack_app; have_server; shift; JAVA="${JAVA:-$WORK/jre/bin/java}" cuda_profile "$@" ;;
  service)
    # After stage2 + stage3 (or `run`, which passes JAVA, JAR and CHECK_CP) on this host.
    if [[ -z "${JAR:-}" || -z "${CHECK_CP:-}" ]]; then unpack_app; have_server; fi
    JAVA="${JAVA:-$WORK/jre/bin/java}" service ;;
  stage1) stage1 ;;
  stage2) stage2 ;;
  stage3) stage3 ;;
  unpack) unpack_app ;;  # only unpack the part this transfer carried (stage2 or stage3)
  batching|fault|throughput|benchmark|startup|jvm-options|selectors|ab|startup-ab|jit|data-path|cpu-threadpool|cuda-shm|pa-cuda-shm)
    # After stage1 on this host (and stage2, plus stage3 for all but the benchmark), one step
    # alone, without the JUnit suite: the dynamic-batching step, the sticky fault through REST,
    # the throughput and service-CPU step (K = 1, 4, 16, the spinning wait beside, then
    # batching), the in-process GPU benchmark, time to ready, or JVM option sets compared; the
    # output goes to $RESULTS/gpu-h200-<step>.txt.
    unpack_app
    [[ $1 == benchmark ]] || have_server
    cuda_export_settle
    cuda_env; mkdir -p "$RESULTS"; : > "$RESULTS/check-stderr.txt"; trap stop_service EXIT
    case $1 in
      jvm-options) jvm_options_bench; exit $? ;;
      selectors) selectors_bench; exit $? ;;
      ab) ab_bench; exit $? ;;
      jit) jit_bench; exit $? ;;
      data-path) data_path_bench; exit $? ;;
      cpu-threadpool) cpu_threadpool_bench; exit $? ;;
      cuda-shm) cuda_shm_check; exit $? ;;
      pa-cuda-shm) cuda_shm_perf_analyzer; exit $? ;;
      startup-ab) startup_ab_bench; exit $? ;;
      batching)
        { echo "$BATCHING_HEADER"; batching_bench "$WORK/service-repo"; } | tee "$RESULTS/gpu-h200-batching.txt" ;;
      fault)
        { make_repo "$WORK/service-repo" 2
          start_service "$WORK/service-repo" --etserve.cuda.streams-per-device=4
          check fault port=$PORT mgmt=$MGMT model=probe-fault cpu-model=demo-xnnpack
          stop_service
          hung_work_fault "$WORK/service-repo"; } | tee "$RESULTS/gpu-h200-fault.txt" ;;
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
  *) echo "usage: scripts/gpu-suite.sh run|bundle|bundle-cuda SOURCE|stage1|cuda-stage1|cuda-export|stage2|stage3|service|cuda-programs|cuda-latency [MODEL...]|startup|batching|fault|throughput|benchmark|unpack|jvm-options|selectors|ab|startup-ab|jit" >&2; exit 2 ;;
esac
