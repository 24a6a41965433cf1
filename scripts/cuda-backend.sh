#!/usr/bin/env bash
# ExecuTorch's CUDA delegate (backend id CudaBackend) and its AOTI shims, built on a host with a
# CUDA 13 toolkit from an ExecuTorch source tree, against the 1.5.1 wheel's libexecutorch.so and
# the one caller-stream library the bridge links (native/cuda-backend/CMakeLists.txt).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ETSERVE_VENV:-$ROOT/.venv}"
BUILD="${ETSERVE_CUDA_BACKEND_BUILD_DIR:-$ROOT/target/cuda-backend-build}"

# What the build reads from the tree: these folders (pack-source copies them) must exist, and
# these files show that they hold the CUDA backend rather than something of the same name.
TREE_DIRS=(backends/aoti backends/cuda/runtime extension/cuda)
TREE_FILES=(backends/aoti/common_shims_slim.cpp backends/cuda/runtime/cuda_backend.cpp
            extension/cuda/caller_stream.h)
# The per-weight manifest the 1.5.1 exporter writes by default (cuda_weight_collector.py).
MANIFEST_MAGIC=ETCUDAFQN3

usage() {
  cat >&2 <<'EOF'
usage: scripts/cuda-backend.sh build --source DIR [--out DIR]
       scripts/cuda-backend.sh pack-source --source DIR --dest DIR
       scripts/cuda-backend.sh payload-format --source DIR

  build           compile libexecutorch_backend_cuda.so and libaoti_cuda_shims.so from the
                  ExecuTorch tree DIR into --out (default target/cuda-backend), run the
                  bridge's delegate gate on them and write <out>/payload-format
  pack-source     copy only the part of the tree the build reads to --dest (to carry it to a
                  GPU host)
  payload-format  say which named-data key payload the tree's delegate reads (blob|manifest)

Environment: ETSERVE_EXECUTORCH_DIR (the wheel's executorch/ folder; default: .venv's),
ETSERVE_CALLER_STREAM_LIBRARY (default: .venv/caller-stream/libextension_cuda.so),
CUDACXX or CUDA_HOME (nvcc; else /usr/local/cuda, else PATH), CUDAARCHS (default 90).
EOF
  exit 2
}
log() { printf '[cuda-backend] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
bad_usage() { log "$*"; exit 2; }

# --- Arguments ---------------------------------------------------------------------------------
[[ $# -gt 0 ]] || usage
COMMAND="$1"; shift
case "$COMMAND" in
  build|pack-source|payload-format) ;;
  -h|--help|help) usage ;;
  *) bad_usage "unknown subcommand '$COMMAND' (build, pack-source or payload-format; --help)" ;;
esac
SOURCE="" OUT="$ROOT/target/cuda-backend" DEST=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --source|--out|--dest)
      [[ $# -ge 2 && -n "$2" ]] || bad_usage "$1 needs a directory"
      case "$1" in --source) SOURCE="$2" ;; --out) OUT="$2" ;; --dest) DEST="$2" ;; esac
      shift 2 ;;
    -h|--help) usage ;;
    *) bad_usage "unknown argument '$1' for $COMMAND (--help)" ;;
  esac
done
[[ -n "$SOURCE" ]] || bad_usage "$COMMAND needs --source DIR, an ExecuTorch source tree"
[[ "$COMMAND" != pack-source || -n "$DEST" ]] || bad_usage "pack-source needs --dest DIR"
[[ -d "$SOURCE" ]] || bad_usage "--source '$SOURCE' is not a directory"
SOURCE="$(cd "$SOURCE" && pwd)"
missing=()
for path in "${TREE_DIRS[@]}"; do [[ -d "$SOURCE/$path" ]] || missing+=("$path/"); done
for path in "${TREE_FILES[@]}"; do [[ -f "$SOURCE/$path" ]] || missing+=("$path"); done
if [[ ${#missing[@]} -gt 0 ]]; then
  bad_usage "--source '$SOURCE' lacks what the CUDA backend build needs: ${missing[*]}"
fi

# --- Subcommands -------------------------------------------------------------------------------
# Prints "<format> <reason>": manifest if the tree's C++ reads the exporter's default per-weight
# manifest, blob (the "<so key>\n<weights key>" payload) otherwise. Tests are not the delegate.
payload_format() {
  local readers keys others
  readers="$(grep -rlF "$MANIFEST_MAGIC" "$SOURCE/backends/aoti" "$SOURCE/backends/cuda/runtime" \
             --include='*.h' --include='*.hpp' --include='*.cpp' --include='*.cc' --include='*.cu' \
             2>/dev/null | grep -vE '/tests?/' | head -1 || true)"
  if [[ -n "$readers" ]]; then
    echo "manifest ${readers#$SOURCE/} reads the $MANIFEST_MAGIC per-weight manifest that the 1.5.1 exporter writes by default"
    return
  fi
  keys="$(grep -rlF resolve_blob_keys "$SOURCE/backends/aoti" --include='*.h' --include='*.cpp' \
          2>/dev/null | grep -vE '/tests?/' | head -1 || true)"
  others="$(grep -rlF ETCUDAFQN "$SOURCE/backends" --include='*.h' --include='*.cpp' 2>/dev/null \
            | grep -vE '/tests?/' | head -1 || true)"
  local why="nothing under backends/aoti or backends/cuda/runtime reads the $MANIFEST_MAGIC manifest"
  [[ -n "$keys" ]] && why+=" (${keys#$SOURCE/}'s resolve_blob_keys takes only '<so key>\\n<weights key>')"
  [[ -n "$others" ]] && why+="; ${others#$SOURCE/} names another ETCUDAFQN version, not the 1.5.1 exporter's"
  echo "blob $why, so export with the binary-blob payload (a manifest fails at init with \"Malformed named-data key payload\")"
}

pack_source() {
  mkdir -p "$DEST"
  # Sources and headers only; upstream's tests, Python and build files stay behind.
  (cd "$SOURCE" && find "${TREE_DIRS[@]}" -type f \
      \( -name '*.h' -o -name '*.hpp' -o -name '*.cuh' -o -name '*.cpp' -o -name '*.cu' \) \
      -not -path '*/test/*' -not -path '*/tests/*' -print0 \
    | xargs -0 cp --parents -t "$DEST")
  local extra
  for extra in LICENSE version.txt; do
    if [[ -f "$SOURCE/$extra" ]]; then cp "$SOURCE/$extra" "$DEST/"; fi
  done
  log "packed $(find "$DEST" -type f | wc -l) files, $(du -sh "$DEST" | cut -f1), into $DEST"
}

# nvcc as CMake would be told about it: CUDACXX, CUDA_HOME, the usual install, PATH.
find_nvcc() {
  local candidate
  for candidate in "${CUDACXX:-}" "${CUDA_HOME:+$CUDA_HOME/bin/nvcc}" /usr/local/cuda/bin/nvcc \
                   "$(command -v nvcc || true)"; do
    if [[ -n "$candidate" && -x "$candidate" ]]; then echo "$candidate"; return; fi
  done
  die "nvcc not found: set CUDACXX or CUDA_HOME to a CUDA 13 toolkit"
}

# The SDK the way native/build.sh finds it: ETSERVE_EXECUTORCH_DIR, else the project venv.
executorch_dir() {
  if [[ -n "${ETSERVE_EXECUTORCH_DIR:-}" ]]; then echo "$ETSERVE_EXECUTORCH_DIR"; return; fi
  bash "$ROOT/native/build.sh" setup
  "$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' \
    | sed 's|$|/executorch|'
}

needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | paste -sd' '; }

build() {
  local sdk caller_stream nvcc started generator=()
  sdk="$(executorch_dir)"
  [[ -f "$sdk/share/cmake/executorch-config.cmake" && -f "$sdk/lib/libexecutorch.so" ]] \
    || die "no ExecuTorch SDK at '$sdk' (share/cmake/executorch-config.cmake, lib/libexecutorch.so)"
  caller_stream="${ETSERVE_CALLER_STREAM_LIBRARY:-$VENV/caller-stream/libextension_cuda.so}"
  [[ -f "$caller_stream" ]] || die "no caller-stream library at '$caller_stream'"
  nvcc="$(find_nvcc)"
  # The venv's CMake (>= 3.28, which the wheel's package needs) and Ninja where it has them.
  if [[ -x "$VENV/bin/cmake" ]]; then export PATH="$VENV/bin:$PATH"; fi
  if command -v ninja >/dev/null; then generator=(-G Ninja); fi
  read -r format reason <<<"$(payload_format)"
  log "tree $SOURCE ($(cat "$SOURCE/version.txt" 2>/dev/null || echo 'no version.txt')), SDK $sdk, nvcc $nvcc"

  started=$SECONDS
  cmake -S "$ROOT/native/cuda-backend" -B "$BUILD" "${generator[@]}" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_COMPILER="$nvcc" \
    -DEXECUTORCH_SOURCE_DIR="$SOURCE" \
    -Dexecutorch_DIR="$sdk/share/cmake" \
    -DETSERVE_CALLER_STREAM_LIBRARY="$caller_stream" >&2
  cmake --build "$BUILD" -j"$(nproc)" >&2
  rm -f "$OUT/libexecutorch_backend_cuda.so" "$OUT/libaoti_cuda_shims.so"
  cmake --install "$BUILD" --prefix "$OUT" >/dev/null
  log "built in $((SECONDS - started)) s"

  # The bridge's own gate (what native/build.sh applies before staging the delegate).
  local delegate="$OUT/libexecutorch_backend_cuda.so" imports
  cat >"$BUILD/gate.cmake" <<'EOF'
include("${MODULE_DIR}/CudaBackend.cmake")
_etserve_check_caller_stream_library(soname "${CALLER_STREAM}" ETSERVE_CALLER_STREAM_LIBRARY)
etserve_cuda_backend_files(files "${DELEGATE}" libexecutorch.so "${soname}")
list(TRANSFORM files REPLACE ".*/" "")
message("gate passed; staged in load order: ${files}")
EOF
  cmake -DMODULE_DIR="$ROOT/native/cmake" -DDELEGATE="$delegate" \
        -DCALLER_STREAM="$caller_stream" -P "$BUILD/gate.cmake" >&2 \
    || die "the built delegate fails the bridge's gate (above)"
  # The gate forbids a second copy; a delegate that never reads the selection is as useless.
  imports="$(nm -D --undefined-only "$delegate")"
  [[ "$imports" == *_ZN10executorch9extension4cuda15getCallerStreamEv* ]] \
    || die "$delegate does not import getCallerStream: it would ignore the caller's stream"

  echo "$format" >"$OUT/payload-format"
  log "NEEDED libexecutorch_backend_cuda.so: $(needed "$delegate")"
  log "NEEDED libaoti_cuda_shims.so: $(needed "$OUT/libaoti_cuda_shims.so")"
  log "payload-format: $format: $reason"
  log "next: native/build.sh build with"
  echo "ETSERVE_CUDA_BACKEND_LIBRARY=$delegate"
}

case "$COMMAND" in
  build) build ;;
  pack-source) pack_source ;;
  payload-format) payload_format ;;
esac
