#!/usr/bin/env bash
# Records the classes a start of the service loads, in the order it loads them, for the jar's
# StartupClassPreload (META-INF/etserve/startup-classes.txt; docs/operations.md#start-up). Run by
# the build (pom.xml, prepare-package, after Spring's AOT processing): the application's classes
# and its runtime class path start in Spring AOT mode, as the packaged jar does, on the demo
# models, serve a few inference calls (scripts/aot-training.sh) and stop; -Xlog:class+load says
# what was loaded from where. Hidden classes and those from the JDK's own CDS archive (already
# cheap to load) are left out.
#
# usage: startup-classes.sh CLASSES-DIR CLASSPATH-FILE OUT [SKIP]
# JAVA: the java to start (the build's). SKIP=true (mvn -DskipStartupClasses) removes OUT and
# records nothing. A failed recording writes no list and says so; the jar then starts without
# preloading.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
classes=$1 classpath_file=$2 out=$3 skip=${4:-false}

rm -f "$out"  # never a list left from an earlier build
[[ $skip == true ]] && { echo "[startup-classes] skipped: the jar will start without preloading classes"; exit 0; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failed() {
  echo "[startup-classes] WARNING: $1; the jar will start without preloading classes. The service's log:" >&2
  tail -20 "$work/service.log" >&2 2>/dev/null
  rm -f "$out"
  exit 0
}
# timeout: a start that never becomes ready, or never stops, must not hold the build.
APP_CLASSPATH="$classes:$(cat "$classpath_file")" ETSERVE_MODEL_REPOSITORY="$ROOT/models" TMPDIR="$work" \
  timeout 300 bash "$ROOT/scripts/aot-training.sh" "$work/service.log" 20 --enable-native-access=ALL-UNNAMED \
  -Dspring.aot.enabled=true -Djava.io.tmpdir="$work" -Dorg.bytedeco.javacpp.cachedir="$work/javacpp" \
  "-Xlog:class+load=info:file=$work/classes.log:none:filecount=0" || failed "the recording start failed"
mkdir -p "$(dirname "$out")"
# "NAME source: WHERE": keep what came from the JDK's modules (jrt:), a directory or a jar.
awk '$1 !~ /\// && $2 == "source:" && $3 ~ /^(jrt:|file:|jar:)/ && !seen[$1]++ { print $1 }' "$work/classes.log" > "$out" \
  && [[ -s $out ]] || failed "no classes recorded"
echo "[startup-classes] $(wc -l < "$out") classes recorded in $out"
