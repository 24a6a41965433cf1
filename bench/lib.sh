# Shared by the bench scripts. Source it from the repository root after setting ROOT, OUT, JAR
# and a log function.

# Rebuilds the service jar when sources are newer, compiles the test classes (the benchmark and
# reliability clients live there) and sets CP to their class path.
bench_build() {
  if [[ ! -f $JAR ]] || [[ -n $(find src/main native pom.xml application.yml -newer "$JAR" -type f -print -quit) ]]; then
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
