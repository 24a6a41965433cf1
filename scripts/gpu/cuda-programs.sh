# Real CUDA-backend programs on a GPU host: the delegate, the export, and the packaged service.
# Sourced by scripts/gpu-suite.sh, which provides (scripts/gpu/common.sh) WORK, RESULTS, BUNDLE, STAGE, PROBE, JAVA, JAR,
# CHECK_CP, start_service, stop_service, check and log/die.
#
#   cuda_bundle SOURCE    (build machine) .device/cuda: the ExecuTorch source subset the delegate
#                         builds from, and the export's Python packages
#   cuda_stage1           (GPU host, after stage1's unpack) build the delegate and the bridge
#                         with it, then export the models with their PyTorch references
#   cuda_programs         (GPU host, after stage2 + stage3) serve them and check them
#
# Models (scripts/export/export_cuda.py): cuda-mlp (dynamic batch 1..32), cuda-resnet18,
# cuda-encoder (SDPA), mixed-probe-cuda (probe partition, CUDA partition, probe partition).

CUDA_MODELS_DIR="$WORK/cuda-models"
CUDA_BACKEND_DIR="$WORK/cuda-backend"
CUDA_SITE="$WORK/pysite"
CUDA_REAL_MODELS=(cuda-mlp cuda-resnet18 cuda-encoder)
# Throughput runs, seconds: short, the suite's device time is scarce; medians need no more.
CUDA_BENCH_WARMUP="${CUDA_BENCH_WARMUP:-3}"
CUDA_BENCH_SECONDS="${CUDA_BENCH_SECONDS:-5}"

cuda_bundle() {
  local source="${1:?usage: gpu-suite.sh bundle-cuda EXECUTORCH_SOURCE_TREE}"
  local dest="$BUNDLE/cuda"
  rm -rf "$dest" && mkdir -p "$dest"
  bash "$ROOT/scripts/cuda-backend.sh" pack-source --source "$source" --dest "$dest/et-src"
  bash "$ROOT/scripts/export/cuda-wheels.sh" pack "$dest/pysite.tar.xz"
  du -sh "$dest"/*
}

# The export in the background (it compiles and tunes kernels for minutes, on other cores),
# then the delegate from the carried source, the bridge and the probe with it (stage1's native
# suite). cuda_programs waits for the export.
cuda_stage1() {
  [[ -d "$BUNDLE/cuda/et-src" ]] || die "no $BUNDLE/cuda: run 'scripts/gpu-suite.sh bundle-cuda SOURCE' on a build machine"
  cuda_env
  mkdir -p "$RESULTS"
  local payload
  payload="$(bash "$ROOT/scripts/cuda-backend.sh" payload-format --source "$BUNDLE/cuda/et-src" | awk '{print $1}')"
  rm -f "$WORK/export.done"
  # setsid: a remote runner ends the processes a command leaves behind, but not a new session.
  setsid bash -c "export WORK='$WORK' BUNDLE='$BUNDLE' ROOT='$ROOT'; source '$ROOT/scripts/gpu/cuda-programs.sh'; \
    cuda_export '$payload' > '$WORK/export.log' 2>&1; echo \$? > '$WORK/export.done'" < /dev/null &
  log "export started in the background ($payload payload; log: $WORK/export.log)"
  log "CUDA delegate from $BUNDLE/cuda/et-src"
  ETSERVE_EXECUTORCH_DIR="$WORK/executorch" ETSERVE_CALLER_STREAM_LIBRARY="$WORK/libextension_cuda.so" \
    bash "$ROOT/scripts/cuda-backend.sh" build --source "$BUNDLE/cuda/et-src" --out "$CUDA_BACKEND_DIR" \
    > "$RESULTS/cuda-backend-build.txt" 2>&1 || { tail -30 "$RESULTS/cuda-backend-build.txt"; die "the CUDA delegate did not build"; }
  tail -6 "$RESULTS/cuda-backend-build.txt"
  local status=0
  export ETSERVE_CUDA_BACKEND_LIBRARY="$CUDA_BACKEND_DIR/libexecutorch_backend_cuda.so"
  native_suite "$WORK/executorch" "$WORK/libextension_cuda.so" || status=1
  grep -q libexecutorch_backend_cuda.so "$STAGE/delegates.list" || { log "the delegate was not staged"; status=1; }
  tail -5 "$WORK/export.log" || true
  return $status
}

# Exports every model with its PyTorch references (scripts/export/export_cuda.py) into
# $CUDA_MODELS_DIR, writing the named-data payload $1 (blob|manifest).
cuda_export() {
  local payload="$1"
  rm -rf "$CUDA_SITE" && mkdir -p "$CUDA_SITE" "$CUDA_MODELS_DIR"
  ETSERVE_EXECUTORCH_DIR="$WORK/executorch" bash "$ROOT/scripts/export/cuda-wheels.sh" unpack \
    "$BUNDLE/cuda/pysite.tar.xz" "$CUDA_SITE" >/dev/null || return 1
  # The inductor cache stays on this host between calls: a second export reuses the kernels.
  PYTHONPATH="$CUDA_SITE" TORCHINDUCTOR_CACHE_DIR="$WORK/inductor-cache" PYTHONUNBUFFERED=1 \
    timeout 1500 python3 "$ROOT/scripts/export/export_cuda.py" --out "$CUDA_MODELS_DIR" --cuda-payload "$payload" \
    ${CUDA_EXPORT_ARGS:-}
}

# Waits for the background export (at most $1 seconds); fails unless it succeeded.
cuda_wait_export() {
  local limit="${1:-600}" waited=0
  while [[ ! -f "$WORK/export.done" ]] && (( waited < limit )); do sleep 2; waited=$((waited + 2)); done
  [[ -f "$WORK/export.done" ]] || { tail -20 "$WORK/export.log"; die "the export is still running after ${limit} s"; }
  cp "$WORK/export.log" "$RESULTS/cuda-export.txt" 2>/dev/null || true
  [[ "$(cat "$WORK/export.done")" == 0 ]] || { tail -40 "$WORK/export.log"; log "the export failed (some models may be missing)"; return 1; }
}

# Timed checks and benchmarks wait for a background export that is still running (cuda-stage1
# starts it): it keeps cores and the GPU busy for minutes. A JUnit suite run beside one failed
# the adaptive wait's timing check, which passed three times once the export had ended.
cuda_export_settle() {
  [[ -f "$WORK/export.log" && ! -f "$WORK/export.done" ]] || return 0
  log "the background export is still running: waiting for it to end before timing anything"
  cuda_wait_export "${CUDA_EXPORT_WAIT:-420}" || true
}

# One model directory whose version 1 is the exported one and whose config.yml is the export's
# with `instances` set (and dynamic batching dropped when $4 is "unbatched").
cuda_model() {
  local repo="$1" name="$2" instances="$3" variant="${4:-}" from="${5:-$2}"
  mkdir -p "$repo/$name"
  ln -sfn "$CUDA_MODELS_DIR/$from/1" "$repo/$name/1"
  if [[ "$variant" == unbatched ]]; then
    awk '/^dynamic-batching:/ {skip = 1; next} skip && /^[ ]/ {next} {skip = 0; print}' \
      "$CUDA_MODELS_DIR/$from/config.yml" > "$repo/$name/config.yml"
  else
    cp "$CUDA_MODELS_DIR/$from/config.yml" "$repo/$name/config.yml"
  fi
  sed -i "s/^instances: .*/instances: $instances/" "$repo/$name/config.yml"
  grep -q '^instances:' "$repo/$name/config.yml" || echo "instances: $instances" >> "$repo/$name/config.yml"
}

# The repository for K streams: every real model with K instances (so streams, not instances,
# bound a K-client run), the MLP again with dynamic batching, the mixed program, the
# sticky-fault probe and a CPU model; with "mixed-only", the mixed program and no other CUDA one.
cuda_repo() {
  local repo="$1" k="$2" only="${3:-}"
  rm -rf "$repo" && mkdir -p "$repo"
  local m
  if [[ "$only" != mixed-only ]]; then
    for m in "${CUDA_REAL_MODELS[@]}"; do cuda_model "$repo" "$m" "$k" unbatched; done
    cuda_model "$repo" cuda-mlp-batched 1 "" cuda-mlp
  fi
  # 2K instances where the stream check runs (K = 4, and 16 alone), so streams are the bound.
  cuda_model "$repo" mixed-probe-cuda $(( k == 4 || ${#only} > 0 ? 2 * k : 1 ))
  mkdir -p "$repo/probe-fault/1"
  cp "$ROOT/src/test/resources/models/caller-stream-probe/1/model.pte" "$repo/probe-fault/1/"
  printf 'inputs: [ { name: x } ]\noutputs: [ { name: observed } ]\nplacement: gpu\ninstances: 1\n' \
    > "$repo/probe-fault/config.yml"
  cp -r "$ROOT/models/demo-xnnpack" "$repo/"
}

cprog() { "$JAVA" -cp "$CHECK_CP" io.etserve.bench.CudaProgramsCheck "$@" 2> >(tee -a "$RESULTS/check-stderr.txt" >&2); }

# LoadGenerator against one model; every answer is checked against the PyTorch reference.
cuda_load() {
  local model="$1" reference="$2" format="$3" clients="$4" label="$5"; shift 5
  "$JAVA" -cp "$CHECK_CP" io.etserve.bench.LoadGenerator --url "http://127.0.0.1:$PORT" --grpc-port "$GRPC" \
    --model "$model" --reference "$reference" --format "$format" --concurrency "$clients" --label "$label" \
    --timeout-ms 60000 --json-out "$RESULTS/cuda-load.jsonl" "$@"
}

# The reference's first case alone (batch 1): what a throughput run sends.
first_case() {
  local from="$1" to="$2"
  python3 - "$from" "$to" <<'PY'
import json, sys
ref = json.load(open(sys.argv[1]))
ref["cases"] = ref["cases"][:1]
json.dump(ref, open(sys.argv[2], "w"))
PY
}

cuda_programs() {
  : "${JAVA:?}" "${JAR:?}" "${CHECK_CP:?}"
  cuda_wait_export "${CUDA_EXPORT_WAIT:-420}" || true
  [[ -d "$CUDA_MODELS_DIR/cuda-resnet18/1" ]] || die "no exported models in $CUDA_MODELS_DIR: run cuda-stage1 on this host first"
  cuda_env
  mkdir -p "$RESULTS"
  local out="$RESULTS/gpu-h200-cuda-programs.txt" repo="$WORK/cuda-repo" status=0 k m
  : > "$RESULTS/cuda-load.jsonl"
  : > "$RESULTS/check-stderr.txt"
  trap stop_service EXIT
  {
    echo "# Real CUDA-backend programs through the packaged service ($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) cores)"
    echo "Delegate: $(head -1 "$CUDA_BACKEND_DIR/payload-format" 2>/dev/null) payload, built by scripts/cuda-backend.sh; $("$JAVA" -version 2>&1 | head -1)"
    echo
  } > "$out"
  for m in "${CUDA_REAL_MODELS[@]}" mixed-probe-cuda; do
    first_case "$CUDA_MODELS_DIR/$m/1/reference.json" "$WORK/$m-case0.json"
  done

  # The first-call trial on the GPU programs too (first-call-trial=all): each runs its first call
  # in a process of its own, with a CUDA context of its own, before it loads; every model must
  # still come up and answer its reference. The ready time stands beside K = 1's below.
  cuda_repo "$repo" 1
  start_service "$repo" --etserve.cuda.streams-per-device=1 --etserve.repository.first-call-trial=all
  echo "first-call-trial=all: ready after $READY_MS ms, $STARTUP_CPU CPU-s" >> "$out"
  cprog health mgmt=$MGMT models=cuda-mlp,cuda-resnet18,cuda-encoder,mixed-probe-cuda >> "$out" || status=1
  for m in "${CUDA_REAL_MODELS[@]}" mixed-probe-cuda; do
    cuda_load "$m" "$CUDA_MODELS_DIR/$m/1/reference.json" binary 1 "first-call-trial=all verify" --warmup 0 \
      --duration 60 --requests 16 >> "$out" || status=1
  done
  stop_service

  # K = 1, 4, 8 streams: correctness over REST (JSON, binary) and gRPC, then batch-1 throughput.
  for k in 1 4 8; do
    cuda_repo "$repo" "$k"
    start_service "$repo" --etserve.cuda.streams-per-device="$k"
    echo "K=$k: ready after $READY_MS ms, $STARTUP_CPU CPU-s" >> "$out"
    if [[ $k == 1 ]]; then
      cprog health mgmt=$MGMT models=cuda-mlp,cuda-resnet18,cuda-encoder,mixed-probe-cuda >> "$out" || status=1
      for m in "${CUDA_REAL_MODELS[@]}" mixed-probe-cuda; do
        for f in json binary grpc; do
          cuda_load "$m" "$CUDA_MODELS_DIR/$m/1/reference.json" "$f" 2 "verify $f" --warmup 0 --duration 60 \
            --requests 64 >> "$out" || status=1
        done
      done
    fi
    for m in "${CUDA_REAL_MODELS[@]}"; do
      cuda_load "$m" "$WORK/$m-case0.json" binary "$k" "K=$k" --warmup "$CUDA_BENCH_WARMUP" \
        --duration "$CUDA_BENCH_SECONDS" --server-pid "$SERVICE_PID" >> "$out" || status=1
    done
    if [[ $k == 1 ]]; then
      # The delegate's own synchronize waits as the device schedule says: blocking-sync beside.
      stop_service
      start_service "$repo" --etserve.cuda.streams-per-device=1 --etserve.cuda.device-schedule=blocking-sync
      for m in "${CUDA_REAL_MODELS[@]}"; do
        cuda_load "$m" "$WORK/$m-case0.json" binary 1 "K=1 blocking-sync" --warmup "$CUDA_BENCH_WARMUP" \
          --duration "$CUDA_BENCH_SECONDS" --server-pid "$SERVICE_PID" >> "$out" || status=1
      done
    fi
    if [[ $k == 4 ]]; then
      # One stream across real delegates, then a call refused after the CUDA partition ran.
      cprog mixed port=$PORT model=mixed-probe-cuda reference="$CUDA_MODELS_DIR/mixed-probe-cuda/1/reference.json" \
        clients=8 calls=1250 expect=4 >> "$out" || status=1
      cprog mixed port=$PORT grpc-port=$GRPC format=grpc model=mixed-probe-cuda \
        reference="$CUDA_MODELS_DIR/mixed-probe-cuda/1/reference.json" clients=8 calls=250 expect=4 >> "$out" || status=1
      cprog reject port=$PORT model=mixed-probe-cuda reference="$CUDA_MODELS_DIR/mixed-probe-cuda/1/reference.json" \
        >> "$out" || status=1
      # Dynamic batching on the MLP: 16 one-row clients, with and without it.
      for m in cuda-mlp cuda-mlp-batched; do
        local before; before="$(cprog exec-count mgmt=$MGMT model="$m")"
        cuda_load "$m" "$WORK/cuda-mlp-case0.json" binary 16 "K=4 batching $m" --warmup 2 --duration 4 \
          --server-pid "$SERVICE_PID" >> "$out" || status=1
        echo "$m: $(( $(cprog exec-count mgmt=$MGMT model="$m") - before )) forward calls for the requests above (warm-up included)" >> "$out"
      done
    fi
    stop_service
  done

  # K = 16: the mixed program with 32 clients.
  cuda_repo "$repo" 16 mixed-only
  start_service "$repo" --etserve.cuda.streams-per-device=16
  cprog mixed port=$PORT model=mixed-probe-cuda reference="$CUDA_MODELS_DIR/mixed-probe-cuda/1/reference.json" \
    clients=32 calls=320 expect=16 >> "$out" || status=1
  stop_service

  # Explicit repository control: device memory per instance and over 20 reloads of ResNet-18,
  # then the sticky fault beside the real programs.
  cuda_repo "$repo" 1
  start_service "$repo" --etserve.cuda.streams-per-device=4 --etserve.repository.mode=explicit
  cprog repository port=$PORT model=cuda-resnet18 action=unload expect=refused >> "$out" || status=1
  stop_service
  start_service "$repo" --etserve.cuda.streams-per-device=4 --etserve.repository.mode=explicit \
    --etserve.repository.unreleased-device-memory=leak
  cprog cycles port=$PORT mgmt=$MGMT model=cuda-resnet18 reference="$WORK/cuda-resnet18-case0.json" cycles=20 \
    pid="$SERVICE_PID" expect=leak >> "$out" || status=1
  cuda_instance_memory "$repo" >> "$out" || status=1
  for m in cuda-resnet18 cuda-encoder; do cuda_load "$m" "$WORK/$m-case0.json" binary 1 "before the fault" \
    --warmup 0 --duration 10 --requests 8 >> "$out" || status=1; done
  check fault port=$PORT mgmt=$MGMT model=probe-fault cpu-model=demo-xnnpack gpu-model=cuda-resnet18 \
    gpu-reference="$WORK/cuda-resnet18-case0.json" >> "$out" || status=1
  stop_service
  trap - EXIT

  { echo; echo "Eager PyTorch on this GPU (export time, batch 1, synchronize in every call):"
    for m in "${CUDA_REAL_MODELS[@]}"; do echo "$m: $(cat "$CUDA_MODELS_DIR/$m/1/eager.json" 2>/dev/null)"; done; } >> "$out"
  cat "$out"
  return $status
}

# Device memory one ResNet-18 instance takes: loaded with 1 and with 4 instances (explicit mode).
cuda_instance_memory() {
  local repo="$1" used0 used1 used4
  used0="$(cprog device-used mgmt=$MGMT)"
  sed -i 's/^instances: .*/instances: 1/' "$repo/cuda-resnet18/config.yml"
  cprog repository port=$PORT model=cuda-resnet18 action=load || return 1
  used1="$(cprog device-used mgmt=$MGMT)"
  cprog repository port=$PORT model=cuda-resnet18 action=unload || return 1
  sed -i 's/^instances: .*/instances: 4/' "$repo/cuda-resnet18/config.yml"
  local after_unload; after_unload="$(cprog device-used mgmt=$MGMT)"
  cprog repository port=$PORT model=cuda-resnet18 action=load || return 1
  used4="$(cprog device-used mgmt=$MGMT)"
  echo
  echo "Device memory of cuda-resnet18 (weights $(du -b "$CUDA_MODELS_DIR/cuda-resnet18/1/"*.ptd | awk '{s += $1} END {printf "%.1f", s / 1048576}') MiB in its .ptd):"
  echo "| instances | device used before load MiB | after load MiB | added MiB | per instance MiB |"
  echo "|---|---|---|---|---|"
  echo "| 1 | $((used0 >> 20)) | $((used1 >> 20)) | $(((used1 - used0) >> 20)) | $(((used1 - used0) >> 20)) |"
  echo "| 4 | $((after_unload >> 20)) | $((used4 >> 20)) | $(((used4 - after_unload) >> 20)) | $(((used4 - after_unload) / 4 >> 20)) |"
}

# The forward call's own time of a model so far: "calls total_us" from the Triton-style series.
cuda_forward_us() {
  local model="$1"
  python3 - "$MGMT" "$model" <<'PY'
import re, sys, urllib.request
body = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/actuator/prometheus", timeout=10).read().decode()
def total(name):
    pat = re.compile(r'^' + name + r'(?:_total)?\{[^}]*model="' + re.escape(sys.argv[2]) + r'"[^}]*\} ([0-9.eE+]+)$', re.M)
    return sum(float(v) for v in pat.findall(body))
print(int(total("nv_inference_exec_count")), int(total("nv_inference_compute_infer_duration_us")))
PY
}

# Batch-1 latency of the exported models in $CUDA_MODELS_DIR (or those named), as a user would
# compare it with PyTorch eager: K = 1 with CUDA's default schedule and with blocking-sync, then
# K = 4. Each run reports REST p50/p99, the service's CPU per call and the forward call's own
# mean time (the service's compute_infer series), so what the REST exchange adds is visible.
# With `perf` on the host, the blocking-sync run is also sampled (where the request threads' CPU goes).
# CUDA_LATENCY_JIT_LOG=1: each service writes HotSpot's JIT log (compilations, deoptimizations)
# into $RESULTS/jit-K<k>-<schedule>.log, and each timed run gets bench/jit-log-summary.py's
# summary of its window (warm-up tail or recompilation loop; bench/README.md). A fresh service
# at ~200 calls/s keeps C2 compiling the request path for ~50 s: CUDA_LATENCY_WARMUP=60 keeps
# that out of the service CPU per call.
cuda_latency() {
  : "${JAVA:?}" "${JAR:?}" "${CHECK_CP:?}"
  cuda_wait_export "${CUDA_EXPORT_WAIT:-420}" || true
  cuda_env
  mkdir -p "$RESULTS"
  local out="$RESULTS/gpu-h200-cuda-latency.txt" repo="$WORK/latency-repo" status=0 m models=("$@")
  ((${#models[@]})) || mapfile -t models < <(cd "$CUDA_MODELS_DIR" && ls -d cuda-* 2>/dev/null | grep -v mixed)
  ((${#models[@]})) || die "no exported models in $CUDA_MODELS_DIR"
  : > "$RESULTS/cuda-load.jsonl"
  : > "$RESULTS/check-stderr.txt"
  trap stop_service EXIT
  { echo "# Batch-1 latency of CUDA-backend programs ($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) cores)"
    echo "$("$JAVA" -version 2>&1 | head -1); warm-up ${CUDA_LATENCY_WARMUP:-5} s, ${CUDA_LATENCY_SECONDS:-10} s per run"
    for m in "${models[@]}"; do echo "$m export: $(cat "$CUDA_MODELS_DIR/$m/1/export.json" 2>/dev/null | head -c 600)"; done
    echo; } > "$out"
  local k schedule
  for run in "1 auto" "1 blocking-sync" "4 auto" "4 blocking-sync"; do
    read -r k schedule <<< "$run"
    rm -rf "$repo" && mkdir -p "$repo"
    for m in "${models[@]}"; do
      cuda_model "$repo" "$m" "$k" unbatched
      first_case "$CUDA_MODELS_DIR/$m/1/reference.json" "$WORK/$m-case0.json"
    done
    local jit_log="$RESULTS/jit-K$k-$schedule.log" windows=()
    JAVA_EXTRA="${JAVA_EXTRA:-}${CUDA_LATENCY_JIT_LOG:+ -Xlog:jit+compilation=debug,deoptimization=debug:file=$jit_log:uptime,tags}" \
      start_service "$repo" --etserve.cuda.streams-per-device="$k" --etserve.cuda.device-schedule="$schedule"
    for m in "${models[@]}"; do
      # Warm-up run first, so the forward series below counts the timed run only.
      cuda_load "$m" "$WORK/$m-case0.json" binary "$k" "warm-up" --warmup 0 \
        --duration "${CUDA_LATENCY_WARMUP:-5}" > /dev/null || status=1
      local before after perf_pid=""
      before="$(cuda_forward_us "$m")"
      if [[ "$k $schedule" == "1 blocking-sync" ]] && command -v perf >/dev/null; then
        perf record -F 499 -g -o "$WORK/perf-$m.data" -p "$SERVICE_PID" -- sleep "${CUDA_LATENCY_SECONDS:-10}" \
          > /dev/null 2>&1 & perf_pid=$!
      fi
      local up0; up0="$(ps -o etimes= -p "$SERVICE_PID" | tr -d ' ')"
      cuda_load "$m" "$WORK/$m-case0.json" binary "$k" "K=$k $schedule" --warmup 0 \
        --duration "${CUDA_LATENCY_SECONDS:-10}" --server-pid "$SERVICE_PID" >> "$out" || status=1
      windows+=("$m $up0 $(ps -o etimes= -p "$SERVICE_PID" | tr -d ' ')")
      after="$(cuda_forward_us "$m")"
      echo "$m K=$k $schedule: forward calls and mean forward time: $before -> $after" \
        "= $(awk -v b="$before" -v a="$after" 'BEGIN{split(b,x," "); split(a,y," "); n=y[1]-x[1]; printf "%d calls, %.0f us each", n, n ? (y[2]-x[2])/n : 0}')" >> "$out"
      if [[ -n "$perf_pid" ]]; then
        wait "$perf_pid" || true
        { echo "perf, $m, K=1 blocking-sync, service process, by shared object then symbol (self):"
          perf report -i "$WORK/perf-$m.data" --no-children --sort dso --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -15
          perf report -i "$WORK/perf-$m.data" --no-children --sort dso,sym --stdio -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -40
        } >> "$out"
      fi
    done
    stop_service
    if [[ -n ${CUDA_LATENCY_JIT_LOG:-} && -f $jit_log ]]; then
      local w wm w0 w1
      for w in "${windows[@]}"; do
        read -r wm w0 w1 <<< "$w"
        { echo "JIT, $wm K=$k $schedule, timed run at service uptime $w0-$w1 s:"
          python3 "$ROOT/bench/jit-log-summary.py" "$jit_log" --from "$w0" --to "$w1" --window 4; } >> "$out" || true
      done
    fi
  done
  trap - EXIT
  { echo; echo "Eager PyTorch on this GPU (export time, batch 1, synchronize in every call):"
    for m in "${models[@]}"; do echo "$m: $(cat "$CUDA_MODELS_DIR/$m/1/eager.json" 2>/dev/null)"; done; } >> "$out"
  cat "$out"
  return $status
}
