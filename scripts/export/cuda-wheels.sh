#!/usr/bin/env bash
# The Python packages export_cuda.py needs beyond what a CUDA PyTorch host already has
# (torch, torchvision, triton, numpy, pyyaml, flatbuffers, ...), as wheels for CPython 3.12
# on Linux x86_64, so that a GPU host without network can install them.
#
#   cuda-wheels.sh download DIR          on a machine with PyPI: fetch the pinned wheels into DIR
#   cuda-wheels.sh install DIR TARGET    on the GPU host: install them into TARGET (no index,
#                                        no dependency resolution) and print the PYTHONPATH
#   cuda-wheels.sh pack TARBALL          the same, unpacked and trimmed, as one small .tar.xz
#   cuda-wheels.sh unpack TARBALL TARGET on the GPU host: unpack it into TARGET
#
# The set is the one seen to suffice for the CUDA export (shared/NOTES.md section 10): executorch
# and torchao, plus modules executorch imports at load time. Versions are pinned so the host
# always gets what was tested; the other pins match scripts/export/requirements.txt where it
# has them.
set -euo pipefail

WHEELS=(
  executorch==1.5.1
  torchao==0.18.0
  ruamel.yaml==0.19.1
  ruamel.yaml.clib==0.2.15
  omegaconf==2.3.1
  hydra-core==1.3.8
  expecttest==0.3.0
  parameterized==0.9.0
  kgb==7.3
)

# The GPU host runs CPython 3.12 (manylinux, glibc 2.39); pip matches each platform tag
# exactly, so name every tag these wheels are published under.
PLATFORM_FLAGS=(
  --python-version 3.12 --implementation cp
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
  --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
  --platform manylinux2014_x86_64
)

usage() {
  sed -n '6,10p' "$0" >&2
  exit 2
}

download() {
  local dir="$1"
  mkdir -p "$dir"
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    "${PLATFORM_FLAGS[@]}" -d "$dir" "${WHEELS[@]}"
  # One version of each: a stale second version in DIR would make the install ambiguous.
  local count
  count="$(find "$dir" -maxdepth 1 -name '*.whl' | wc -l)"
  if [[ "$count" -ne "${#WHEELS[@]}" ]]; then
    echo "[cuda-wheels] $dir holds $count wheels, expected ${#WHEELS[@]}: empty it and download again" >&2
    exit 1
  fi
  du -ch "$dir"/*.whl | tail -1 | sed 's/^/[cuda-wheels] total /' >&2
}

install() {
  local dir="$1" target="$2"
  shopt -s nullglob
  local wheels=("$dir"/*.whl)
  if [[ "${#wheels[@]}" -ne "${#WHEELS[@]}" ]]; then
    echo "[cuda-wheels] $dir holds ${#wheels[@]} wheels, expected ${#WHEELS[@]} (run 'download' first)" >&2
    exit 1
  fi
  python3 -m pip install --quiet --disable-pip-version-check --no-index --no-deps --no-compile \
    --no-cache-dir --upgrade --target "$target" "${wheels[@]}"
  echo "export PYTHONPATH=$target\${PYTHONPATH:+:\$PYTHONPATH}"
}

TMP_DIR=""
cleanup() { if [[ -n "$TMP_DIR" ]]; then rm -rf "$TMP_DIR"; fi; }
trap cleanup EXIT

# The same packages unpacked into one site folder and trimmed to what the export imports, as
# one xz tarball small enough to travel beside the GPU bundle (about 10 MB instead of 23). Left
# out: executorch/lib (the C++ SDK; `unpack` links the one the GPU suite carries anyway), and the
# extension modules for other runtimes and devices (LLM runner, Qualcomm, Core ML).
TRIM=(executorch/lib executorch/extension/llm/runner/_llm_runner.*.so
      executorch/backends/qualcomm/python/*.so executorch/backends/apple/coreml/*.so
      executorch-*.dist-info/RECORD test)
pack() {
  local tarball
  tarball="$(realpath -m "$1")"
  TMP_DIR="$(mktemp -d)"
  download "$TMP_DIR/wheels"
  mkdir -p "$TMP_DIR/site" "$(dirname "$tarball")"
  local wheel
  for wheel in "$TMP_DIR"/wheels/*.whl; do
    # A wheel is a zip of its install tree (none of these has scripts or data to place).
    python3 -m zipfile -e "$wheel" "$TMP_DIR/site"
  done
  (cd "$TMP_DIR/site" && for path in "${TRIM[@]}"; do rm -rf $path; done \
    && find . -name __pycache__ -prune -exec rm -rf {} +)
  tar -C "$TMP_DIR/site" -cf - . | xz -9 -T0 > "$tarball"
  du -h "$tarball" | sed 's/^/[cuda-wheels] /' >&2
}

# Unpacks `pack`'s tarball into TARGET (xz, or Python's lzma where xz is missing); with
# ETSERVE_EXECUTORCH_DIR set, links its lib/ (the same wheel's C++ libraries) into the package.
unpack() {
  local tarball="$1" target="$2"
  mkdir -p "$target"
  if command -v xz >/dev/null; then tar -C "$target" -xJf "$tarball"
  else python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$tarball" "$target"; fi
  if [[ -n "${ETSERVE_EXECUTORCH_DIR:-}" && -d "$ETSERVE_EXECUTORCH_DIR/lib" ]]; then
    ln -sfn "$(cd "$ETSERVE_EXECUTORCH_DIR" && pwd)/lib" "$target/executorch/lib"
  fi
  echo "export PYTHONPATH=$target\${PYTHONPATH:+:\$PYTHONPATH}"
}

case "${1:-}" in
  download) [[ $# -eq 2 ]] || usage; download "$2" ;;
  install) [[ $# -eq 3 ]] || usage; install "$2" "$3" ;;
  pack) [[ $# -eq 2 ]] || usage; pack "$2" ;;
  unpack) [[ $# -eq 3 ]] || usage; unpack "$2" "$3" ;;
  *) usage ;;
esac
