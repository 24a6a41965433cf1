#!/usr/bin/env bash
# Triton's Model Analyzer (PyPI triton-model-analyzer, pinned) in remote mode against the service
# in explicit repository mode: a brute search over instance_group count 1..2 with dynamic batching
# off and on, on the weight-heavy batch-mlp program (1024 -> 2048 -> 2048 -> 1024, XNNPACK,
# batch 1..32), at concurrency 1 and 4 over gRPC, then its report (HTML and CSV).
#
# Model Analyzer overlays its parameters on the model's configuration and cannot remove a field,
# so "dynamic batching off" and "on" are two names for the same program: "mlp" (config.yml with no
# dynamic-batching: max_batch_size 0) and "mlp_batched" (dynamic-batching, max-batch-size 32,
# 500us). For each it profiles the configuration the service reports ("default") and one variant
# per instance count, each loaded with load_model(config=...) (etserve maps instance_group.count to
# instances). The models are cpu_only: Model Analyzer then scrapes no GPU metrics; it reads the
# configuration from the service (no config.pbtxt in the repository), and perf_analyzer (which it
# runs) reads the statistics extension and the management port's /actuator/prometheus.
#
# Model Analyzer runs in a venv (target/model-analyzer/venv, Python >= 3.10); the perf_analyzer it
# starts is bench_perf_analyzer's (bench/lib.sh: in a chroot of the project's trixie base image
# on a host with glibc < 2.38, so run this as root there), through a wrapper that keeps the
# working directory, where perf_analyzer writes the CSV Model Analyzer reads.
#
# Knobs: MA_VERSION (1.58.0), PA_VERSION (2.60.0), MA_CONCURRENCY ("1, 4"), MA_PROTOCOL (grpc),
# BENCH_PORT (18580), BENCH_MGMT_PORT (18581), BENCH_GRPC_PORT (18501).
#   bench/model-analyzer.sh -> target/model-analyzer/summary.md, results/ (reports, CSV)
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/target/model-analyzer
MA_VERSION=${MA_VERSION:-1.58.0}
PA_VERSION=${PA_VERSION:-2.60.0}
CONCURRENCY=${MA_CONCURRENCY:-1, 4}
PROTOCOL=${MA_PROTOCOL:-grpc}
PORT=${BENCH_PORT:-18580}
MGMT_PORT=${BENCH_MGMT_PORT:-18581}
GRPC_PORT=${BENCH_GRPC_PORT:-18501}
JAR=$ROOT/target/etserve-0.1.0-SNAPSHOT.jar
log() { printf '[model-analyzer %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
mkdir -p "$OUT"

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
bench_export_batch_mlp
bench_build
bench_require_free_ports "set BENCH_PORT / BENCH_MGMT_PORT / BENCH_GRPC_PORT" "$PORT" "$MGMT_PORT" "$GRPC_PORT"

# --- Model Analyzer and the perf_analyzer it runs ---------------------------------------------
if [[ $("$OUT/venv/bin/pip" show triton-model-analyzer 2>/dev/null | awk '/^Version/ {print $2}') != "$MA_VERSION" ]]; then
  log "installing triton-model-analyzer==$MA_VERSION into $OUT/venv"
  rm -rf "$OUT/venv" && python3 -m venv "$OUT/venv"
  "$OUT/venv/bin/pip" install -q --disable-pip-version-check "triton-model-analyzer==$MA_VERSION"
fi
bench_perf_analyzer "$PA_VERSION"
WORK=$OUT/work
PA=$OUT/perf_analyzer
if [[ -n $PA_CHROOT ]]; then
  # perf_analyzer writes its CSV into the working directory: one inside the chroot, entered there.
  WORK=$PA_CHROOT/tmp/model-analyzer
  printf '#!/bin/sh\nexec chroot %q /bin/sh -c %q perf_analyzer "$@"\n' "$PA_CHROOT" \
    "cd \"/tmp/model-analyzer\" && exec /opt/pa/perf_analyzer \"\$@\"" > "$PA"
else
  printf '#!/bin/sh\nexec %q "$@"\n' "$PA_WHEEL_DIR/perf_analyzer/bin/perf_analyzer" > "$PA"
fi
chmod +x "$PA"
rm -rf "$WORK" "$OUT/results" "$OUT/output-models" "$OUT/checkpoints" && mkdir -p "$WORK"

# --- the repository and the service -----------------------------------------------------------
REPO=$OUT/models
rm -rf "$REPO"
for m in mlp mlp_batched; do
  mkdir -p "$REPO/$m" && ln -s "$ROOT/target/bench-models/batch-mlp/1" "$REPO/$m/1"
done
IO='inputs: [ { name: x, dims: [-1, 1024] } ]\noutputs: [ { name: y } ]\ninstances: 1\n'
printf "$IO" > "$REPO/mlp/config.yml"
printf "${IO}dynamic-batching: { max-batch-size: 32, max-queue-delay: 500us }\n" > "$REPO/mlp_batched/config.yml"
cp "$JAR" "$OUT/etserve.jar"
trap 'kill ${SERVER_PID:-} 2>/dev/null || true; wait 2>/dev/null || true; [[ -n ${PA_CHROOT:-} ]] && umount "$PA_CHROOT/proc" 2>/dev/null || true' EXIT
log "service on 127.0.0.1:$PORT (gRPC $GRPC_PORT), explicit repository mode"
bench_start_service "$OUT/server.log" "$REPO" --etserve.grpc.port="$GRPC_PORT" --etserve.repository.mode=explicit

cat > "$OUT/profile.yml" <<EOF
# Written by bench/model-analyzer.sh
model_repository: $REPO
output_model_repository_path: $OUT/output-models
override_output_model_repository: true
export_path: $OUT/results
checkpoint_directory: $OUT/checkpoints
triton_launch_mode: remote
triton_http_endpoint: 127.0.0.1:$PORT
triton_grpc_endpoint: 127.0.0.1:$GRPC_PORT
triton_metrics_url: http://127.0.0.1:$MGMT_PORT/actuator/prometheus
client_protocol: $PROTOCOL
perf_analyzer_path: $PA
run_config_search_mode: brute
run_config_search_disable: true
concurrency: [$CONCURRENCY]
profile_models:
  mlp:
    cpu_only: true
    model_config_parameters:
      instance_group: [ { kind: KIND_CPU, count: [1, 2] } ]
    perf_analyzer_flags:
      shape: "x:1,1024"
  mlp_batched:
    cpu_only: true
    model_config_parameters:
      max_batch_size: [32]
      dynamic_batching: { max_queue_delay_microseconds: [500] }
      instance_group: [ { kind: KIND_CPU, count: [1, 2] } ]
EOF
log "model-analyzer profile -f $OUT/profile.yml (log: $OUT/profile.log)"
(cd "$WORK" && "$OUT/venv/bin/model-analyzer" profile -v -f "$OUT/profile.yml") > "$OUT/profile.log" 2>&1 \
  || { tail -30 "$OUT/profile.log" >&2; exit 1; }
grep -q "Profile complete" "$OUT/profile.log" || { tail -30 "$OUT/profile.log" >&2; exit 1; }

# Every variant Model Analyzer sent, as the service answered it while loaded: load each once more
# with the config.pbtxt Model Analyzer wrote (as JSON, what it sends) and read GET .../config back.
"$OUT/venv/bin/python" - "$OUT" "$PORT" <<'PY' > "$OUT/variants.txt"
import glob, json, os, sys
import tritonclient.http as http
from google.protobuf import json_format, text_format
from tritonclient.grpc import model_config_pb2
out, port = sys.argv[1], sys.argv[2]
client = http.InferenceServerClient(f"127.0.0.1:{port}")
for path in sorted(glob.glob(f"{out}/output-models/*/config.pbtxt")):
    variant = os.path.basename(os.path.dirname(path))
    cfg = text_format.Parse(open(path).read(), model_config_pb2.ModelConfig())
    client.load_model(cfg.name, config=json.dumps(json_format.MessageToDict(cfg, preserving_proto_field_name=True)))
    served = client.get_model_config(cfg.name)
    print(f"{variant}: sent instance_group.count {cfg.instance_group[0].count if cfg.instance_group else '-'},"
          f" dynamic_batching {'yes' if cfg.HasField('dynamic_batching') else 'no'};"
          f" served instance_group.count {served['instance_group'][0]['count']}, max_batch_size"
          f" {served['max_batch_size']}, dynamic_batching {'yes' if 'dynamic_batching' in served else 'no'}")
    client.unload_model(cfg.name)
PY

{
  echo "host: $(nproc) CPUs, load after the run: $(cut -d' ' -f1-3 /proc/loadavg); triton-model-analyzer $MA_VERSION, perf-analyzer $PA_VERSION$([[ -n $PA_CHROOT ]] && echo ' (in a chroot of the trixie base image)'); commit $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (+ changes)')"
  echo
  echo "Variants (what Model Analyzer sent, what the service then reported):"
  echo
  sed 's/^/- /' "$OUT/variants.txt"
  echo
  python3 - "$OUT/results/results/metrics-model-inference.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
cols = list(rows[0].keys())
print("| " + " | ".join(cols) + " |")
print("|" + "---|" * len(cols))
for r in sorted(rows, key=lambda r: (r["Model"], r["Model Config Path"], int(r["Concurrency"]))):
    print("| " + " | ".join(r[c] for c in cols) + " |")
PY
} | tee "$OUT/summary.md"
