#!/usr/bin/env bash
# Reliability suite: starts the packaged service on loopback over a repository of demo models,
# crafted and bit-flipped program files, then runs io.etserve.bench.ReliabilityCheck against it:
# hostile requests, corrupt files (verification=minimal), isolation, file operations, failed
# reloads (on a second service in the poll mode, RELIABILITY_PORT + 2 and + 3), slow clients, slow
# headers (4,000 slowloris connections), stalled uploads, overload, a soak.
# Writes target/bench/reliability.txt; exits 1 when a check failed. Takes about 3 min + the soak.
#   bench/reliability.sh                 (RELIABILITY_SOAK_SECONDS=120, RELIABILITY_PORT=18090)
#   RELIABILITY_STEPS=slowHeaders,stalledUploads   only those steps (ReliabilityCheck's names)
#   RELIABILITY_SERVER_ARGS="--server.jetty.max-connections=2048"   more arguments for the service
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/target/bench
PORT=${RELIABILITY_PORT:-18090}
MGMT_PORT=$((PORT + 1))
SOAK=${RELIABILITY_SOAK_SECONDS:-120}
JAR=$ROOT/target/etserve-0.1.0-SNAPSHOT.jar
log() { printf '[reliability %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
mkdir -p "$OUT"
# The slow-headers step holds 4,000 sockets on each side: raise the descriptor limit to the most allowed.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
bench_build
bench_require_free_ports "set RELIABILITY_PORT" "$PORT" "$MGMT_PORT"
REPO=$OUT/reliability-models
rm -rf "$REPO"
java -cp "$CP" io.etserve.bench.ReliabilityCheck prepare "$REPO"
cp "$JAR" "$OUT/etserve-reliability.jar"
# Failed reloads need the poll mode, which would reload the models the other steps change on
# disk: they run against a second service over a repository of their own.
ROLLOUT_PORT=$((PORT + 2))
ROLLOUT_REPO=$OUT/reliability-rollout-models
if [[ -z ${RELIABILITY_STEPS:-} || ,$RELIABILITY_STEPS, == *,failedReloads,* ]]; then
  bench_require_free_ports "set RELIABILITY_PORT" "$ROLLOUT_PORT" "$((ROLLOUT_PORT + 1))"
  rm -rf "$ROLLOUT_REPO"
  java -cp "$CP" io.etserve.bench.ReliabilityCheck prepare-rollout "$ROLLOUT_REPO"
  log "starting the poll-mode service on 127.0.0.1:$ROLLOUT_PORT (log: $OUT/reliability-rollout-server.log)"
  "$SERVER_JAVA" -Xmx512m --enable-native-access=ALL-UNNAMED -jar "$OUT/etserve-reliability.jar" \
    --server.address=127.0.0.1 --server.port="$ROLLOUT_PORT" --etserve.grpc.address=127.0.0.1 --etserve.grpc.port=0 \
    --management.server.address=127.0.0.1 --management.server.port="$((ROLLOUT_PORT + 1))" \
    --etserve.model-repository="$ROLLOUT_REPO" --etserve.repository.mode=poll --etserve.repository.poll-interval=500ms \
    > "$OUT/reliability-rollout-server.log" 2>&1 &
  ROLLOUT_PID=$!
fi
log "starting the service on 127.0.0.1:$PORT (log: $OUT/reliability-server.log)"
"$SERVER_JAVA" -Xmx1g --enable-native-access=ALL-UNNAMED -jar "$OUT/etserve-reliability.jar" \
  --server.address=127.0.0.1 --server.port="$PORT" --etserve.grpc.address=127.0.0.1 \
  --management.server.address=127.0.0.1 --management.server.port="$MGMT_PORT" \
  --etserve.model-repository="$REPO" --etserve.native.verification=minimal \
  --etserve.inference.queue-timeout=50ms --etserve.inference.body-timeout=10s ${RELIABILITY_SERVER_ARGS:-} \
  > "$OUT/reliability-server.log" 2>&1 &
SERVER_PID=$!
trap 'kill $SERVER_PID ${ROLLOUT_PID:-} 2>/dev/null; wait $SERVER_PID ${ROLLOUT_PID:-} 2>/dev/null || true' EXIT
# Waits for a service (pid, port, log) to answer ready.
await_ready() {
  local pid=$1 port=$2 log=$3 code
  for _ in $(seq 120); do
    kill -0 "$pid" 2>/dev/null || { tail -40 "$log" >&2; echo "the service exited" >&2; exit 1; }
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 1
  done
  for _ in $(seq 120); do
    code=$(exec 3<>"/dev/tcp/127.0.0.1/$port"; printf 'GET /v2/health/ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' >&3; head -c 12 <&3 | tail -c 3) || true
    [[ $code == 200 ]] && break
    sleep 1
  done
}
await_ready "$SERVER_PID" "$PORT" "$OUT/reliability-server.log"
[[ -n ${ROLLOUT_PID:-} ]] && await_ready "$ROLLOUT_PID" "$ROLLOUT_PORT" "$OUT/reliability-rollout-server.log"
{
  echo "reliability suite, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "host: $(nproc) CPUs, open files $(ulimit -n); service: java -jar, 127.0.0.1:$PORT, verification=minimal, queue-timeout=50ms, body-timeout=10s ${RELIABILITY_SERVER_ARGS:-}"
  status=0
  java -cp "$CP" -Dreliability.repository="$REPO" -Dreliability.management-port="$MGMT_PORT" \
    -Dreliability.rollout-repository="$ROLLOUT_REPO" -Dreliability.rollout-port="$ROLLOUT_PORT" \
    -Dreliability.rollout-management-port="$((ROLLOUT_PORT + 1))" \
    ${RELIABILITY_STEPS:+-Dreliability.steps="$RELIABILITY_STEPS"} \
    io.etserve.bench.ReliabilityCheck run "$PORT" "$SERVER_PID" "$SOAK" || status=$?
  kill -0 "$SERVER_PID" 2>/dev/null && echo "service process alive at the end: yes" || { echo "service process alive at the end: NO"; status=1; }
  if [[ -n ${ROLLOUT_PID:-} ]]; then
    kill -0 "$ROLLOUT_PID" 2>/dev/null && echo "poll-mode service process alive at the end: yes" \
      || { echo "poll-mode service process alive at the end: NO"; status=1; }
  fi
  exit $status
} 2>&1 | tee "$OUT/reliability.txt"
