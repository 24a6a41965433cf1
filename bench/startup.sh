#!/usr/bin/env bash
# Time to ready and startup CPU of the packaged service, median of N starts.
#
#   bench/startup.sh [N=5] [extra java options or --app.args ...]
#
# Starts `java -jar target/etserve-*.jar` (JAVA, JAR and JAVA_OPTS override) on the bundled
# demo models (ETSERVE_BENCH_REPOSITORY names another repository), polls
# /actuator/health/readiness with bash's /dev/tcp (no process per poll, so
# polling costs the starting JVM nothing), and reports the wall time from exec to the first
# 200 and the CPU-seconds the process used until then (/proc/PID/stat utime+stime).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
N="${1:-5}"; shift || true
JAVA="${JAVA:-java}"
JAR="${JAR:-$(ls "$ROOT"/target/etserve-*.jar | head -1)}"
MGMT="${ETSERVE_BENCH_MGMT_PORT:-18181}"
PORT="${ETSERVE_BENCH_PORT:-18180}"
read -r -a OPTS <<< "${JAVA_OPTS:-}"

ms=() cpu=()
for i in $(seq 1 "$N"); do
  t0="$(date +%s%N)"
  "$JAVA" --enable-native-access=ALL-UNNAMED "${OPTS[@]}" -jar "$JAR" --server.port="$PORT" \
    --management.server.port="$MGMT" --etserve.model-repository="${ETSERVE_BENCH_REPOSITORY:-$ROOT/models}" "$@" >/tmp/etserve-startup.log 2>&1 &
  pid=$!
  code=000
  for _ in $(seq 1 6000); do
    code="$( (exec 3<>"/dev/tcp/127.0.0.1/$MGMT" && printf 'GET /actuator/health/readiness HTTP/1.0\r\n\r\n' >&3 \
      && read -r _ c _ <&3 && echo "$c") 2>/dev/null || echo 000)"
    [[ "$code" == 200 ]] && break
    kill -0 "$pid" 2>/dev/null || { tail -20 /tmp/etserve-startup.log >&2; exit 1; }
    sleep 0.01
  done
  t1="$(date +%s%N)"
  ticks="$(awk '{print $14 + $15}' "/proc/$pid/stat")"
  kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
  ms+=($(( (t1 - t0) / 1000000 ))); cpu+=("$ticks")
  echo "start $i: $(( (t1 - t0) / 1000000 )) ms to ready, $(awk -v t="$ticks" 'BEGIN{printf "%.2f", t/100}') CPU-s" >&2
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
echo "startup ($N starts, $(nproc) cores, JAVA_OPTS='${JAVA_OPTS:-}'): median $(median "${ms[@]}") ms to ready," \
  "$(awk -v t="$(median "${cpu[@]}")" 'BEGIN{printf "%.2f", t/100}') CPU-s"
