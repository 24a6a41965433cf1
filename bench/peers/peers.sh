# The Python serving peers bench/wrk.sh compares the service with (BENCH_PEERS): MLServer 1.7.1
# and KServe 0.21.0, serving the same .pte through ExecuTorch's own Python runtime
# (executorch_program.py). A peer is named `mlserver` or `kserve` (its defaults: one inference
# worker process, one uvicorn worker), or `NAME:N` for N of them (MLServer's parallel_workers,
# KServe's --workers), each with its own copy of the program. Source it after bench/lib.sh; it
# needs ROOT, OUT and log.
#
# Each peer has a venv of its own (.venv-peers/NAME, from requirements-NAME.txt, rebuilt when
# the pins or the export venv's Python change) that sees torch and executorch through a .pth
# file naming the export venv's site-packages (scripts/export/export.sh --venv makes it on first
# use): ExecuTorch's Python runtime links libtorch, and PyPI's torch for Linux is the several-GB
# CUDA build, installed once.

PEERS_DIR=$ROOT/bench/peers

# The python of peer $1's venv, made or remade as needed, from the export venv's interpreter: the
# .pth file below only works between two venvs of one Python version.
peer_python() {
  local name="$1" venv="$ROOT/.venv-peers/$1" req="$PEERS_DIR/requirements-$1.txt" want export_python
  [[ -f $req ]] || { echo "no peer named $name (bench/peers/requirements-$name.txt)" >&2; exit 1; }
  export_python="$(bash "$ROOT/scripts/export/export.sh" --venv)/bin/python"
  want="$(sha256sum "$req" | cut -d' ' -f1) $("$export_python" -c 'import sys; print(sys.version.split()[0])')"
  if [[ ! -x $venv/bin/python || "$(cat "$venv/.requirements.sha256" 2> /dev/null)" != "$want" ]]; then
    log "installing $name into $venv"
    rm -rf "$venv"
    "$export_python" -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$req" >&2
    echo "$want" > "$venv/.requirements.sha256"
  fi
  # Appended after the venv's own packages: the peer's pins win where both have a package.
  "$export_python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' \
    > "$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/zz-etserve-export.pth"
  echo "$venv/bin/python"
}

# Starts peer $1 serving model $2 (models/$2/1/model.pte) on 127.0.0.1, HTTP port $3 and gRPC
# port $4 (MLServer also takes $4 + 1 for its metrics), logging to $5, in a process group of its
# own (MLServer runs inference in a worker process: CPU and memory are counted over the group).
# Sets PEER_PID (the group's leader) and returns once the model answers ready.
peer_start() {
  local name="$1" model="$2" http="$3" grpc="$4" logfile="$5" python workers=
  local peer=${name%%:*}
  [[ $name != *:* ]] || workers=${name#*:}
  [[ -z $workers || $workers =~ ^[1-9][0-9]*$ ]] || { echo "peer $name: workers must be a number" >&2; exit 1; }
  python=$(peer_python "$peer")
  local pte="$ROOT/models/$model/1/model.pte"
  case $peer in
    mlserver)
      local repo="$OUT/peers/mlserver-$http"
      rm -rf "$repo" && mkdir -p "$repo/$model"
      # Its Prometheus files in the run's folder, not the working directory's .metrics.
      printf '{"host": "127.0.0.1", "http_port": %d, "grpc_port": %d, "metrics_port": %d, "metrics_dir": "%s"%s}\n' \
        "$http" "$grpc" $((grpc + 1)) "$repo/.metrics" "${workers:+, \"parallel_workers\": $workers}" > "$repo/settings.json"
      printf '{"name": "%s", "implementation": "mlserver_model.ExecuTorchModel", "parameters": {"uri": "%s"}}\n' \
        "$model" "$pte" > "$repo/$model/model-settings.json"
      PYTHONPATH=$PEERS_DIR setsid "$(dirname "$python")/mlserver" start "$repo" > "$logfile" 2>&1 &
      ;;
    kserve)
      PYTHONPATH=$PEERS_DIR setsid "$python" "$PEERS_DIR/kserve_model.py" --model_name "$model" --pte "$pte" \
        --http_port "$http" --grpc_port "$grpc" ${workers:+--workers "$workers"} > "$logfile" 2>&1 &
      ;;
  esac
  PEER_PID=$!
  bench_wait_ready "$name" "$PEER_PID" "http://127.0.0.1:$http/v2/models/$model/ready" "$logfile"
}

# Stops the process group led by $1 (a peer's workers with it).
peer_stop() {
  kill -TERM -- "-$1" 2> /dev/null || return 0
  for _ in $(seq 20); do
    kill -0 -- "-$1" 2> /dev/null || return 0
    sleep 0.5
  done
  kill -KILL -- "-$1" 2> /dev/null || true
}
