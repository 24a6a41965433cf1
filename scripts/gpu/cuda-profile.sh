# shellcheck shell=bash
# Sourced by scripts/gpu-suite.sh (scripts/gpu/common.sh and cuda-programs.sh provide the rest).
#
# Where a CUDA-backend program's service CPU goes, per call: one model at K = 1 with blocking-sync
# (request threads sleep through the GPU time, so what they still burn is the service's own work
# and the delegate's host work), under a steady binary-REST load, with a JFR recording of the
# service (the JRE's jdk.jfr module) summarised over the timed window by scripts/gpu/jfr_summary.py:
# Java samples by thread kind and frame, native-method samples (inside the forward call), and the
# JIT's compilations and deoptimizations by method (does it keep recompiling under steady load?).
cuda_profile() {
  : "${JAVA:?}" "${JAR:?}" "${CHECK_CP:?}"
  cuda_wait_export "${CUDA_EXPORT_WAIT:-420}" || true
  cuda_env
  mkdir -p "$RESULTS"
  local models=("$@") m out="$RESULTS/gpu-h200-cuda-profile.txt" repo="$WORK/profile-repo" status=0
  ((${#models[@]})) || models=(cuda-resnet18)
  local jfr_tool; jfr_tool="$(dirname "$JAVA")/jfr"
  [[ -x "$jfr_tool" ]] || die "no jfr tool beside $JAVA (the bundle's JRE needs the jdk.jfr module)"
  : > "$RESULTS/cuda-load.jsonl"
  : > "$RESULTS/check-stderr.txt"
  trap stop_service EXIT
  echo "# Service CPU per call of CUDA-backend programs, K = 1, blocking-sync ($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) cores; $("$JAVA" -version 2>&1 | head -1))" > "$out"
  for m in "${models[@]}"; do
    rm -rf "$repo" && mkdir -p "$repo"
    cuda_model "$repo" "$m" 1 unbatched
    first_case "$CUDA_MODELS_DIR/$m/1/reference.json" "$WORK/$m-case0.json"
    local rec="$WORK/profile-$m.jfr"
    JAVA_EXTRA="-XX:StartFlightRecording=settings=profile,jdk.Compilation#threshold=0ms,filename=$rec" \
      start_service "$repo" --etserve.cuda.streams-per-device=1 --etserve.cuda.device-schedule=blocking-sync
    cuda_load "$m" "$WORK/$m-case0.json" binary 1 "warm-up" --warmup 0 --duration "${CUDA_PROFILE_WARMUP:-8}" > /dev/null || status=1
    local since until
    since="$(date +%s.%N)"
    cuda_load "$m" "$WORK/$m-case0.json" binary 1 "profiled K=1 blocking-sync" --warmup 0 \
      --duration "${CUDA_PROFILE_SECONDS:-10}" --server-pid "$SERVICE_PID" >> "$out" || status=1
    until="$(date +%s.%N)"
    # The recording is written when the JVM exits (SIGTERM: a graceful stop).
    stop_service
    { echo; echo "## $m: JFR over the timed window"
      python3 "$GPU_SCRIPTS/jfr_summary.py" "$rec" --jfr "$jfr_tool" --since "$since" --until "$until" || status=1
      echo; } >> "$out"
    local size; size="$(stat -c %s "$rec" 2>/dev/null || echo 0)"
    (( size > 0 && size < 15 * 1024 * 1024 )) && cp "$rec" "$RESULTS/" || true
  done
  trap - EXIT
  cat "$out"
  return $status
}
