# Shared by the bench scripts. Source it from the repository root after setting ROOT, OUT, JAR
# and a log function.

# Rebuilds the service jar when sources are newer, compiles the test classes (the benchmark and
# reliability clients live there) and sets CP to their class path.
bench_build() {
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

# Starts $OUT/etserve.jar on loopback ($PORT, management $MGMT_PORT) with the model repository
# $2 and any further arguments, logging to $1; sets SERVER_PID and returns once /v2/health/ready
# answers (exits, showing the log's tail, if the service dies first).
bench_start_service() {
  local log="$1" repo="$2"
  shift 2
  "$SERVER_JAVA" --enable-native-access=ALL-UNNAMED -jar "$OUT/etserve.jar" \
    --server.address=127.0.0.1 --server.port="$PORT" --etserve.grpc.address=127.0.0.1 \
    --management.server.address=127.0.0.1 --management.server.port="$MGMT_PORT" \
    --etserve.model-repository="$repo" "$@" > "$log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 120); do
    kill -0 "$SERVER_PID" 2>/dev/null || { tail -40 "$log" >&2; echo "the service exited" >&2; exit 1; }
    curl -sf -o /dev/null "http://127.0.0.1:$PORT/v2/health/ready" && return 0
    sleep 1
  done
  echo "the service was not ready within 120 s" >&2
  exit 1
}
