#!/usr/bin/env bash
# The image's AOT training run (Dockerfile): the service on the demo models, fed JSON inference
# calls over REST until the request path's classes are loaded and its methods profiled, then
# stopped with SIGTERM, on which the JVM writes the cache given in the Java options (Java 25: an
# AOT cache with method profiles, so a new container's first requests run compiled code sooner;
# bench/results/2026-12-05-2core-grpc-and-tail.md). Bash only (the runtime image has no curl).
#
# usage: aot-training.sh LOG CALLS JAVA-OPTION...   (exits non-zero when the service did not serve)
# The image's java and jar unless JAVA and APP_JAR say otherwise (scripts/gpu/service.sh trains
# the extracted jar on the GPU host the same way), or the application's classes from the class
# path APP_CLASSPATH gives (scripts/startup-classes.sh, in the build); ETSERVE_* variables
# configure the service.
set -uo pipefail
log=$1 calls=$2
shift 2

if [[ -n ${APP_CLASSPATH:-} ]]; then
  launch=(-cp "$APP_CLASSPATH" io.etserve.EtServeApplication)
else
  launch=(-jar "${APP_JAR:-/opt/etserve/app/app.jar}")
fi
"${JAVA:-java}" "$@" "${launch[@]}" --server.port=0 --management.server.port=0 \
  --etserve.grpc.port=0 > "$log" 2>&1 &
pid=$!
trap 'kill -9 "$pid" 2>/dev/null' EXIT

port=""
ready() {
  exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
  printf 'GET /v2/health/ready HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' >&3
  local status=""
  IFS= read -r -t 5 status <&3
  exec 3<&-
  [[ $status == *" 200"* ]]
}
for _ in $(seq 600); do  # two minutes at most
  kill -0 "$pid" 2>/dev/null || { echo "the training service exited" >&2; exit 1; }
  [[ -n $port ]] || port=$(grep -o 'started on port [0-9]*' "$log" | head -1 | awk '{print $4}')
  [[ -n $port ]] && ready 2>/dev/null && break
  sleep 0.2
done
ready 2>/dev/null || { echo "the training service never became ready" >&2; exit 1; }

# A connection per call (Connection: close), read to its end: keep-alive calls from bash stall
# on delayed ACKs (bash reads byte by byte); a new connection costs far less.
body='{"inputs":[{"name":"x","shape":[1,16],"datatype":"FP32","data":[0.5,-1,2,0,1.5,-0.25,3,1,0,2,-2,0.75,1,-1.5,0.25,4]}]}'
infer() {
  local model=$1 n=$2 i status rest request
  printf -v request 'POST /v2/models/%s/infer HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s' \
    "$model" "${#body}" "$body"
  for ((i = 0; i < n; i++)); do
    exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
    printf '%s' "$request" >&3
    IFS= read -r -t 10 status <&3 || return 1
    [[ $status == *" 200"* ]] || { echo "training call to $model answered: $status" >&2; return 1; }
    IFS= read -r -d '' -t 10 rest <&3  # the rest of the answer, to the connection's end
    exec 3<&-
  done
}
infer demo-portable "$calls" && infer demo-xnnpack "$calls" || exit 1

kill -TERM "$pid"
wait "$pid"
rc=$?
trap - EXIT
[[ $rc == 0 || $rc == 143 ]]  # 143: stopped by the SIGTERM, as asked
