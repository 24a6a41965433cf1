#!/usr/bin/env bash
# Native half of the build, driven by Maven (pom.xml) and usable by hand:
#   native/build.sh setup   project-local venv (.venv) with the pinned SDK and tools
#   native/build.sh build   setup + CMake configure/build + stage libraries for the jar
#   native/build.sh test    C++ tests (ctest) + the linkage gate on the built bridge
# Re-running reuses what is there: no network once .venv and .cache exist.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ETSERVE_VENV:-$ROOT/.venv}"
CACHE="$ROOT/.cache/native"
BUILD="${ETSERVE_NATIVE_BUILD_DIR:-$ROOT/target/native}"
STAGE="${ETSERVE_NATIVE_STAGE_DIR:-$ROOT/target/native-stage}/META-INF/etserve/native/linux-x86_64"
REQUIREMENTS="$ROOT/native/requirements.txt"
# ExecuTorch's caller-stream library, built from its extension/cuda target, as shipped in
# this PyPI wheel (the CUDA ExecuTorch wheel is not on PyPI).
CALLER_STREAM_WHEEL="torch-tensorrt-executorch-runtime==0.1.0"

log() { printf '[native] %s\n' "$*" >&2; }

python_for_venv() {
  for p in python3.12 python3.11 python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import venv' >/dev/null 2>&1; then
      echo "$p"; return
    fi
  done
  log "python3 with the venv module is required"; exit 1
}

setup() {
  local stamp="$VENV/.etserve-requirements"
  local want
  want="$(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)-$CALLER_STREAM_WHEEL"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -f "$VENV/caller-stream/libextension_cuda.so" ]]; then
    return
  fi
  log "creating $VENV (pinned: native/requirements.txt)"
  "$(python_for_venv)" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    -r "$REQUIREMENTS"
  mkdir -p "$CACHE/wheels" "$VENV/caller-stream"
  "$VENV/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: --python-version 3.11 --platform manylinux_2_28_x86_64 \
    -d "$CACHE/wheels" "$CALLER_STREAM_WHEEL"
  # Only the one library; the wheel's Python module and other libraries are not used.
  "$VENV/bin/python" - "$CACHE/wheels" "$VENV/caller-stream" <<'PY'
import glob, os, sys, zipfile
wheel = sorted(glob.glob(os.path.join(sys.argv[1], "torch_tensorrt_executorch_runtime-0.1.0-*.whl")))[-1]
with zipfile.ZipFile(wheel) as z:
    data = z.read("torch_tensorrt_executorch_runtime/libextension_cuda.so")
out = os.path.join(sys.argv[2], "libextension_cuda.so")
with open(out, "wb") as f:
    f.write(data)
PY
  echo "$want" > "$stamp"
}

site_packages() { "$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }

# The ExecuTorch package root (lib/, include/, share/cmake/): the venv's, unless
# ETSERVE_EXECUTORCH_DIR names one (a GPU host without network, see scripts/gpu-suite.sh).
executorch_dir() {
  if [[ -n "${ETSERVE_EXECUTORCH_DIR:-}" ]]; then echo "$ETSERVE_EXECUTORCH_DIR"; else echo "$(site_packages)/executorch"; fi
}

java_home() {
  if [[ -n "${JAVA_HOME:-}" && -f "$JAVA_HOME/include/jni.h" ]]; then echo "$JAVA_HOME"; return; fi
  local javac; javac="$(readlink -f "$(command -v javac)")"
  dirname "$(dirname "$javac")"
}

# libcudart.so.13: the CUDA toolkit's on a GPU host, else the pinned pip wheel's.
cudart() {
  local cuda="${CUDA_HOME:-/usr/local/cuda}"
  if [[ -f "$cuda/lib64/libcudart.so.13" ]]; then echo "$cuda/lib64/libcudart.so.13"; return; fi
  if [[ -f "$cuda/targets/x86_64-linux/lib/libcudart.so.13" ]]; then
    echo "$cuda/targets/x86_64-linux/lib/libcudart.so.13"; return
  fi
  echo "$(site_packages)/nvidia/cu13/lib/libcudart.so.13"
}

build() {
  if [[ -z "${ETSERVE_EXECUTORCH_DIR:-}" ]]; then
    setup
    export PATH="$VENV/bin:$PATH"
  fi
  local cuda="${CUDA_HOME:-/usr/local/cuda}"
  local extra=()
  [[ -x "$cuda/bin/nvcc" ]] && extra+=("-DCMAKE_CUDA_COMPILER=$cuda/bin/nvcc")
  # A CUDA delegate built outside the wheel (scripts/cuda-backend.sh); empty: the wheel's, if any.
  extra+=("-DETSERVE_CUDA_BACKEND_LIBRARY=${ETSERVE_CUDA_BACKEND_LIBRARY:-}")
  cmake -S "$ROOT/native" -B "$BUILD" -G Ninja -Wno-dev --log-level=WARNING \
    -DCMAKE_BUILD_TYPE=Release \
    -Dexecutorch_DIR="$(executorch_dir)/share/cmake" \
    -DJAVA_HOME="$(java_home)" \
    -DETSERVE_CUDART_LIBRARY="$(cudart)" \
    -DETSERVE_CALLER_STREAM_LIBRARY="${ETSERVE_CALLER_STREAM_LIBRARY-$VENV/caller-stream/libextension_cuda.so}" \
    "${extra[@]}" >&2
  cmake --build "$BUILD" -- -j"${ETSERVE_NATIVE_JOBS:-2}" >&2
  rm -rf "$STAGE"
  cmake --install "$BUILD" --prefix "$STAGE" >/dev/null
  # ExecuTorch's package adds its own absolute lib dir as a link option; the staged bridge
  # must find its neighbours only, wherever the jar extracts them.
  if command -v patchelf >/dev/null; then
    patchelf --set-rpath '$ORIGIN' "$STAGE/libetserve_jni.so" "$STAGE/etserve-first-call"
  else
    log "patchelf not found: the staged bridge keeps the build's absolute RUNPATH entry"
  fi
  # The jar's loader reads this list: load order, dependencies first. The caller-stream
  # library is staged under its soname (libextension_cuda.so or libexecutorch_extension_cuda.so).
  local caller_stream
  caller_stream="$(cd "$STAGE" && ls | grep -E '^lib(executorch_)?extension_cuda\.so$')"
  (cd "$STAGE" && printf '%s\n' libcudart.so.13 "$caller_stream" libexecutorch_threadpool.so \
      libexecutorch.so libexecutorch_kernels_optimized.so libexecutorch_backend_xnnpack.so \
      libetserve_jni.so > libraries.txt)
  log "staged $(ls "$STAGE" | wc -l) files in $STAGE"
}

run_tests() {
  [[ -d "$VENV/bin" ]] && export PATH="$VENV/bin:$PATH"
  ctest --test-dir "$BUILD" --output-on-failure -j"${ETSERVE_NATIVE_JOBS:-2}"
  bash "$ROOT/native/scripts/check-linkage.sh" --bridge "$BUILD/libetserve_jni.so"
  bash "$ROOT/native/scripts/check-linkage.sh" --dir "$STAGE"
}

case "${1:-build}" in
  setup) setup ;;
  build) build ;;
  test) run_tests ;;
  *) echo "usage: native/build.sh setup|build|test" >&2; exit 2 ;;
esac
