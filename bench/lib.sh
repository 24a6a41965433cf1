# Shared by the bench scripts. Source it from the repository root after setting ROOT, OUT, JAR
# and a log function.

# Rebuilds the service jar when sources are newer, compiles the test classes (the benchmark and
# reliability clients live there) and sets CP to their class path.
bench_build() {
  # BENCH_CP: a classpath with the test classes already built (the GPU suite's bundle on a host
  # without Maven); the service then comes from BENCH_JAR.
  if [[ -n ${BENCH_CP:-} ]]; then
    CP=$BENCH_CP
    return 0
  fi
  if [[ -z ${BENCH_JAR:-} ]] && { [[ ! -f $JAR ]] \
      || [[ -n $(find src/main native pom.xml application.yml -newer "$JAR" -type f -print -quit) ]]; }; then
    log "building the service jar (mvn -q -DskipTests package)"
    mvn -B -q -DskipTests package
  fi
  log "compiling the test classes (mvn -q -DskipNative=true test-compile)"
  mvn -B -q -DskipNative=true test-compile
  mvn -B -q dependency:build-classpath -Dmdep.includeScope=test -Dmdep.outputFile="$OUT/classpath.txt"
  CP="$ROOT/target/test-classes:$ROOT/target/classes:$(cat "$OUT/classpath.txt")"
}

# The weight-heavy batch-mlp program (batch 1..32) in target/bench-models/batch-mlp, exported on
# first use (needs the export venv).
bench_export_batch_mlp() {
  if [[ ! -f $ROOT/target/bench-models/batch-mlp/1/reference.json ]]; then
    log "exporting batch-mlp (scripts/export/export.sh --bench batch-mlp)"
    bash "$ROOT/scripts/export/export.sh" --bench batch-mlp >&2
  fi
}

# The service runs on the JRE the image ships (25) when this machine has one.
SERVER_JAVA="$(bash "$ROOT/scripts/java-home.sh")"
SERVER_JAVA="${SERVER_JAVA:+$SERVER_JAVA/bin/}java"

# Exits unless every loopback port given after the hint is free (an earlier run may still be up).
bench_require_free_ports() {
  local hint="$1" p
  shift
  for p in "$@"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "127.0.0.1:$p is already in use (an earlier run still up?); $hint" >&2
      exit 1
    fi
  done
}

# async-profiler's agent library (Maven Central's tools.profiler:async-profiler, the jar of this
# machine's architecture), fetched once into target/async-profiler. Sets AP_LIB.
bench_async_profiler() {
  local version=4.2 arch dir="$ROOT/target/async-profiler"
  case $(uname -m) in x86_64) arch=linux-x64 ;; aarch64) arch=linux-arm64 ;; *) echo "no async-profiler for $(uname -m)" >&2; exit 1 ;; esac
  AP_LIB=$dir/$arch/libasyncProfiler.so
  [[ -f $AP_LIB ]] && return 0
  log "fetching async-profiler $version ($arch)"
  mvn -B -q dependency:copy -Dartifact="tools.profiler:async-profiler:$version:jar:$arch" -DoutputDirectory="$dir"
  python3 -m zipfile -e "$dir/async-profiler-$version-$arch.jar" "$dir"
  [[ -f $AP_LIB ]] || { echo "no $AP_LIB in async-profiler's jar" >&2; exit 1; }
}

# Starts or stops (with "stop,file=F,collapsed") async-profiler in the running service, $1 being
# the agent's arguments (jcmd's JVMTI.agent_load; the service started with
# -XX:+EnableDynamicAgentLoading).
bench_profiler() {
  local jcmd=jcmd
  [[ $SERVER_JAVA == */java ]] && jcmd=${SERVER_JAVA%java}jcmd
  "$jcmd" "$SERVER_PID" JVMTI.agent_load "$AP_LIB" "\"$1\"" > /dev/null
}

# Starts $OUT/etserve.jar (or $SERVICE_JAR) on loopback ($PORT, management $MGMT_PORT) with the
# model repository $2 and any further arguments, logging to $1; sets SERVER_PID and returns once
# /v2/health/ready answers (exits, showing the log's tail, if the service dies first).
# $SERVICE_JAVA_OPTS: JVM options (word-split), e.g. a JIT log or a flight recording.
bench_start_service() {
  local log="$1" repo="$2" pin=()
  shift 2
  # BENCH_SERVER_CPUS: the CPUs the service may run on (taskset -c), to fix where its threads run.
  [[ -z ${BENCH_SERVER_CPUS:-} ]] || pin=(taskset -c "$BENCH_SERVER_CPUS")
  # shellcheck disable=SC2086
  "${pin[@]}" "$SERVER_JAVA" --enable-native-access=ALL-UNNAMED ${SERVICE_JAVA_OPTS:-} -jar "${SERVICE_JAR:-$OUT/etserve.jar}" \
    --server.address=127.0.0.1 --server.port="$PORT" --etserve.grpc.address=127.0.0.1 \
    --management.server.address=127.0.0.1 --management.server.port="$MGMT_PORT" \
    --etserve.model-repository="$repo" "$@" > "$log" 2>&1 &
  SERVER_PID=$!
  bench_wait_ready "the service" "$SERVER_PID" "http://127.0.0.1:$PORT/v2/health/ready" "$log"
}

# Returns once $3 answers 2xx; exits, showing log $4's tail, if process $2 ($1, for the message)
# dies first or 120 s pass.
bench_wait_ready() {
  local what="$1" pid="$2" url="$3" log="$4"
  for _ in $(seq 120); do
    kill -0 "$pid" 2>/dev/null || { tail -40 "$log" >&2; echo "$what exited" >&2; exit 1; }
    curl -sf -o /dev/null "$url" && return 0
    sleep 1
  done
  echo "$what was not ready within 120 s (log: $log)" >&2
  exit 1
}

# PyPI's perf-analyzer $1 (one manylinux_2_38 wheel: the C++ binary, no Python needed), fetched
# once into target/perf-analyzer/wheel-$1. Sets PA_WHEEL_DIR, and PA_RUN to the command that runs
# it: the binary where glibc >= 2.38 (the GPU host's Ubuntu 24.04, Debian trixie); on an older host
# (Debian 12: 2.36) a chroot (root needed) of PA_ROOTFS, or of the project's own Debian trixie
# base image tarball (.ci/base-images.sh: .cache/base-images/runtime-cpu-trixie-*.tar) extracted
# once outside the repository (~/.cache/etserve/<tarball name>: inside the tree its absolute
# symlinks break the image test's build-context scan), with /opt/pa/perf_analyzer
# copied in and /proc mounted.
# PA_CHROOT is that root ("" when native); it shares the host's network, so 127.0.0.1 is the host.
bench_perf_analyzer() {
  local version="$1" glibc tarball
  PA_WHEEL_DIR=$ROOT/target/perf-analyzer/wheel-$version
  if [[ ! -x $PA_WHEEL_DIR/perf_analyzer/bin/perf_analyzer ]]; then
    log "fetching perf-analyzer==$version (manylinux_2_38 wheel)"
    rm -rf "$PA_WHEEL_DIR" && mkdir -p "$PA_WHEEL_DIR"
    python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
      --platform manylinux_2_38_x86_64 -d "$PA_WHEEL_DIR" "perf-analyzer==$version"
    (cd "$PA_WHEEL_DIR" && python3 -m zipfile -e perf_analyzer-"$version"-*.whl . \
      && chmod +x perf_analyzer/bin/perf_analyzer)
  fi
  local bin=$PA_WHEEL_DIR/perf_analyzer/bin/perf_analyzer
  glibc=$(ldd --version | sed -n 1p | grep -oE '[0-9]+\.[0-9]+$')
  PA_CHROOT=
  if [[ $(printf '%s\n2.38\n' "$glibc" | sort -V | sed -n 1p) != 2.38 ]]; then
    PA_CHROOT=${PA_ROOTFS:-}
    if [[ -z $PA_CHROOT ]]; then
      tarball=$(ls "$ROOT"/.cache/base-images/runtime-cpu-trixie-*.tar 2>/dev/null | sed -n 1p || true)
      [[ -n $tarball ]] || { echo "glibc $glibc < 2.38 and no PA_ROOTFS or trixie base image tarball: run this on the GPU host, or bash .ci/base-images.sh first" >&2; exit 1; }
      PA_CHROOT=${XDG_CACHE_HOME:-$HOME/.cache}/etserve/$(basename "$tarball" .tar)
      if [[ ! -x $PA_CHROOT/usr/bin/env ]]; then
        log "extracting $(basename "$tarball") into $PA_CHROOT (glibc $glibc here)"
        rm -rf "$PA_CHROOT" && mkdir -p "$PA_CHROOT" && tar -x -C "$PA_CHROOT" -f "$tarball"
      fi
    fi
    mkdir -p "$PA_CHROOT/opt/pa" "$PA_CHROOT/proc" "$PA_CHROOT/dev/shm"
    cp "$bin" "$PA_CHROOT/opt/pa/perf_analyzer"
    mountpoint -q "$PA_CHROOT/proc" || mount -t proc proc "$PA_CHROOT/proc"
    # The host's /dev/shm, so shared-memory objects perf_analyzer makes are the ones the service opens.
    mountpoint -q "$PA_CHROOT/dev/shm" || mount --bind /dev/shm "$PA_CHROOT/dev/shm"
    PA_RUN=(chroot "$PA_CHROOT" /opt/pa/perf_analyzer)
    log "glibc $glibc here: perf_analyzer runs in a chroot of $PA_CHROOT ($(chroot "$PA_CHROOT" ldd --version | sed -n 1p))"
  else
    PA_RUN=("$bin")
  fi
  "${PA_RUN[@]}" --version >/dev/null 2>&1 || "${PA_RUN[@]}" --help >/dev/null 2>&1 \
    || { echo "perf_analyzer does not start: $("${PA_RUN[@]}" --help 2>&1 | tail -3)" >&2; exit 1; }
}

# Builds the service at commit $1 once (Java only, with this tree's native libraries, so the two
# must not differ in native/) into $OUT/${3}baseline-<commit>, copies its jar to $2 and sets
# BASE_COMMIT: the "before" of a benchmark that runs two builds in one run.
bench_baseline_jar() {
  local baseline="$1" dest="$2" prefix="${3:-}"
  BASE_COMMIT=$(git rev-parse --short "$baseline")
  local src=$OUT/${prefix}baseline-$BASE_COMMIT
  if ! git diff --quiet "$baseline" HEAD -- native; then
    echo "native/ differs between $baseline and HEAD: the baseline cannot reuse this tree's native build" >&2
    exit 1
  fi
  if [[ ! -f $src/target/etserve-0.1.0-SNAPSHOT.jar ]]; then
    log "building the baseline $baseline ($BASE_COMMIT) in $src (Java only, this tree's native libraries)"
    rm -rf "$src" && mkdir -p "$src"
    git archive "$baseline" | tar -x -C "$src"
    (cd "$src" && mvn -B -q -ntp -DskipTests -DskipNative=true -Dnative.stage.dir="$ROOT/target/native-stage" package)
  fi
  cp "$src/target/etserve-0.1.0-SNAPSHOT.jar" "$dest"
}
