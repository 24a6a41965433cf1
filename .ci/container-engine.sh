#!/usr/bin/env bash
# A local container engine for CI and for developers without one: Debian's docker.io dockerd.
#   .ci/container-engine.sh start   install docker.io if missing, start dockerd, wait for it
#   .ci/container-engine.sh stop    stop the dockerd this script started
#   .ci/container-engine.sh status  exit 0 when an engine answers
#   .ci/container-engine.sh env     print the exports Testcontainers needs on this engine:
#                                   eval "$(.ci/container-engine.sh env)"
# Idempotent: `start` does nothing when an engine already answers on DOCKER_HOST.
#
# No registry is reachable and no bridge network may be created, so the daemon runs with no
# iptables and no default bridge; containers use `--network host` (or none). Storage is
# overlay2 where this kernel lets us mount overlayfs on the data root, else vfs (which copies
# the whole image for every layer and container, and builds far slower).
set -euo pipefail

DATA_ROOT="${ETSERVE_DOCKER_DATA_ROOT:-/var/lib/etserve-docker}"
STATE_DIR="${ETSERVE_DOCKER_STATE_DIR:-/var/run/etserve-docker}"
LOG_FILE="${ETSERVE_DOCKER_LOG:-$STATE_DIR/dockerd.log}"
PID_FILE="$STATE_DIR/dockerd.pid"
SOCKET="/var/run/docker.sock"
START_TIMEOUT_S="${ETSERVE_DOCKER_START_TIMEOUT_S:-90}"
export DOCKER_HOST="${DOCKER_HOST:-unix://$SOCKET}"

log() { printf '[container-engine] %s\n' "$*" >&2; }

# overlay2 when an overlay mount works on the data root's file system, else vfs.
storage_driver() {
  if [[ -n "${ETSERVE_DOCKER_STORAGE_DRIVER:-}" ]]; then echo "$ETSERVE_DOCKER_STORAGE_DRIVER"; return; fi
  local probe; probe="$(mktemp -d "$DATA_ROOT/.overlay-probe.XXXXXX")"
  mkdir -p "$probe"/{lower,upper,work,merged}
  if mount -t overlay overlay -o "lowerdir=$probe/lower,upperdir=$probe/upper,workdir=$probe/work" \
      "$probe/merged" 2>/dev/null; then
    umount "$probe/merged"
    echo overlay2
  else
    echo vfs
  fi
  rm -rf "$probe"
}

engine_answers() { docker info >/dev/null 2>&1; }

install_engine() {
  command -v dockerd >/dev/null 2>&1 && command -v docker >/dev/null 2>&1 && return
  log "installing docker.io (Debian package)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends docker.io >/dev/null
}

# The dockerd named in the pid file, alive (a killed daemon can linger as a zombie, which
# `kill -0` still reports as running).
daemon_pid() {
  [[ -f "$PID_FILE" ]] || return 1
  local pid; pid="$(cat "$PID_FILE")"
  [[ "$pid" =~ ^[0-9]+$ && -r "/proc/$pid/stat" ]] || return 1
  [[ "$(cut -d' ' -f3 "/proc/$pid/stat")" != Z ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q dockerd || return 1
  echo "$pid"
}

launch_daemon() {
  rm -f "$PID_FILE"
  local driver; driver="$(storage_driver)"
  log "starting dockerd (storage $driver, data root $DATA_ROOT, log $LOG_FILE)"
  # setsid: the daemon outlives this script and the shell that ran it.
  setsid dockerd \
    --host="unix://$SOCKET" \
    --data-root="$DATA_ROOT" \
    --exec-root="$STATE_DIR/exec" \
    --pidfile="$PID_FILE" \
    --storage-driver="$driver" \
    --iptables=false --ip6tables=false --bridge=none \
    >>"$LOG_FILE" 2>&1 </dev/null &
}

start() {
  if engine_answers; then
    log "engine already answers on $DOCKER_HOST"
    return
  fi
  install_engine
  mkdir -p "$DATA_ROOT" "$STATE_DIR"
  daemon_pid >/dev/null || launch_daemon
  # A daemon killed just before can leave its containerd dying for a few seconds, and the new
  # one then gives up on it: one more launch covers that.
  local waited=0 launches=1
  until engine_answers; do
    # Give dockerd a moment to write its pid file before judging it dead.
    if (( waited >= 5 )) && ! daemon_pid >/dev/null; then
      if (( launches < 2 )); then
        log "dockerd exited while starting; retrying once"
        sleep 2
        launch_daemon
        launches=$((launches + 1))
        waited=0
        continue
      fi
      log "dockerd exited; last log lines:"
      tail -n 30 "$LOG_FILE" >&2 || true
      exit 1
    fi
    if (( waited >= START_TIMEOUT_S )); then
      log "dockerd did not answer within ${START_TIMEOUT_S}s; last log lines:"
      tail -n 30 "$LOG_FILE" >&2 || true
      exit 1
    fi
    sleep 1
    waited=$((waited + 1))
  done
  log "engine ready after ${waited}s: $(docker version --format 'server {{.Server.Version}}, API {{.Server.APIVersion}}')"
}

stop() {
  local pid
  if ! pid="$(daemon_pid)"; then
    log "no dockerd started by this script is running"
    rm -f "$PID_FILE"
    return
  fi
  log "stopping dockerd (pid $pid)"
  kill "$pid"
  for _ in $(seq 1 30); do daemon_pid >/dev/null || break; sleep 1; done
  if daemon_pid >/dev/null; then
    log "dockerd still running after 30s; sending SIGKILL"
    kill -9 "$pid" || true
  fi
  rm -f "$PID_FILE"
}

# Ryuk (Testcontainers' reaper) is an image that cannot be pulled here; without a bridge
# network Testcontainers must be told the engine's containers are reached on localhost.
print_env() {
  printf 'export DOCKER_HOST=%q\n' "$DOCKER_HOST"
  echo 'export TESTCONTAINERS_RYUK_DISABLED=true'
  echo 'export TESTCONTAINERS_HOST_OVERRIDE=localhost'
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) engine_answers ;;
  env) print_env ;;
  *) echo "usage: .ci/container-engine.sh start|stop|status|env" >&2; exit 2 ;;
esac
