# Shared by the GPU suite's steps (sourced by scripts/gpu-suite.sh): where things are, logging,
# the GPU build's paths, and the packaged service started, checked and stopped.
JUNIT_CONSOLE="org.junit.platform:junit-platform-console-standalone:6.0.3"
ASSERTJ="org.assertj:assertj-core:3.27.7"
# What the jlinked JRE needs to run Spring Boot on Jetty (java.desktop: java.beans), and jdk.jfr
# for the profiling step (a recording and the jfr tool that reads it).
JRE_MODULES="java.base,java.logging,java.management,java.naming,java.xml,java.sql,java.instrument,java.net.http,jdk.unsupported,jdk.crypto.ec,jdk.management,java.desktop,jdk.jfr"

log() { printf '[gpu-suite] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# xz where the host has it, Python's lzma where it does not.
unpack_xz() {
  local archive="$1" dest="$2"
  mkdir -p "$dest"
  if command -v xz >/dev/null; then tar -C "$dest" -xJf "$archive"
  else python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$archive" "$dest"; fi
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

SERVICE_PID=""
SERVICE_LOG=""
PORT=18080
MGMT=18081
GRPC=18001

# Starts the application ($JAR: the extracted jar, or a fat jar) and waits for readiness: sets
# SERVICE_PID, SERVICE_LOG (its stdout and stderr), READY_MS (process start to readiness 200) and
# STARTUP_CPU (CPU-seconds the process used until then).
READY_MS=""
STARTUP_CPU=""
start_service() {
  local repo="$1"; shift
  # Each start's log under logs/, so a step's tables and profiles stay few at the top of $RESULTS.
  mkdir -p "$RESULTS/logs"
  local log="$RESULTS/logs/service-$(date +%s%N).log"
  SERVICE_LOG="$log"
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
