#!/usr/bin/env bash
# Prints the home of a JDK 25 or newer: the runtime the image and the GPU bundle ship (AOT
# cache, Jetty's best CPU per request). Looks at JAVA_HOME, the `javac` on PATH, then
# /usr/lib/jvm. Prints nothing when there is none; the build itself needs only JDK 17.
set -euo pipefail

feature() { "$1/bin/java" -XshowSettings:properties -version 2>&1 | awk -F' = ' '/java.specification.version/ {print $2; exit}'; }

candidates=()
[[ -n "${JAVA_HOME:-}" ]] && candidates+=("$JAVA_HOME")
if command -v javac >/dev/null; then candidates+=("$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")"); fi
for d in /usr/lib/jvm/*; do [[ -x "$d/bin/javac" && ! -L "$d" ]] && candidates+=("$d"); done
for home in "${candidates[@]}"; do
  [[ -x "$home/bin/javac" && -x "$home/bin/jlink" ]] || continue
  v="$(feature "$home")"
  if [[ "$v" =~ ^[0-9]+$ ]] && (( v >= 25 )); then echo "$home"; exit 0; fi
done
