#!/usr/bin/env bash
# scripts/cuda-backend.sh without a GPU, a toolkit or an ExecuTorch tree: its argument and tree
# checks (exit 2 and a message naming the problem, before anything is looked up or built), the
# payload-format decision and pack-source, on small stand-in trees made here.
#   cuda_backend_script_test.sh path/to/scripts/cuda-backend.sh
set -uo pipefail

SCRIPT="$1"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
passed=0 failed=0

# expect <name> <exit status> <regex the output must match> -- command...
expect() {
  local name="$1" want="$2" regex="$3" out rc
  shift 4
  out="$("$@" 2>&1)"; rc=$?
  if [[ "$rc" == "$want" ]] && grep -qE -- "$regex" <<<"$out"; then
    passed=$((passed + 1)); echo "PASS $name"
  else
    failed=$((failed + 1))
    printf 'FAIL %s: want exit %s and /%s/, got exit %s:\n%s\n' "$name" "$want" "$regex" "$rc" "$out"
  fi
}

# A stand-in with every path the script checks for; the sources are one-line placeholders.
make_tree() {
  local tree="$1" file
  for file in backends/aoti/common_shims_slim.cpp backends/cuda/runtime/cuda_backend.cpp \
              extension/cuda/caller_stream.h; do
    mkdir -p "$tree/$(dirname "$file")"; echo "// $file" >"$tree/$file"
  done
  echo 'inline int resolve_blob_keys();' >"$tree/backends/aoti/aoti_delegate_handle.h"
}

run() { bash "$SCRIPT" "$@"; }

expect no_arguments 2 '^usage: scripts/cuda-backend.sh build --source DIR' -- run
expect help 2 'pack-source --source DIR --dest DIR' -- run --help
expect unknown_subcommand 2 "unknown subcommand 'frobnicate'" -- run frobnicate
expect build_without_source 2 'build needs --source DIR' -- run build
expect source_without_value 2 '--source needs a directory' -- run build --source
expect unknown_argument 2 "unknown argument '--bogus' for build" -- run build --bogus x
expect source_not_a_directory 2 "--source '$WORK/absent' is not a directory" \
  -- run build --source "$WORK/absent"
mkdir -p "$WORK/empty"
expect source_lacks_everything 2 \
  "lacks what the CUDA backend build needs: backends/aoti/ backends/cuda/runtime/ extension/cuda/ backends/aoti/common_shims_slim.cpp" \
  -- run build --source "$WORK/empty"
make_tree "$WORK/no_backend"
rm "$WORK/no_backend/backends/cuda/runtime/cuda_backend.cpp"
expect source_lacks_cuda_backend 2 'build needs: backends/cuda/runtime/cuda_backend.cpp$' \
  -- run build --source "$WORK/no_backend"
expect pack_source_without_dest 2 'pack-source needs --dest DIR' \
  -- run pack-source --source "$WORK/no_backend"
expect payload_format_checks_tree 2 'lacks what the CUDA backend build needs' \
  -- run payload-format --source "$WORK/empty"

# The 22 August 2026 tree: key payload only.
make_tree "$WORK/blob"
expect payload_blob 0 "^blob .*aoti_delegate_handle.h's resolve_blob_keys" \
  -- run payload-format --source "$WORK/blob"
# The manifest magic in a test does not make the delegate read it.
make_tree "$WORK/test_only"
mkdir -p "$WORK/test_only/backends/aoti/tests"
echo 'const char* m = "ETCUDAFQN3";' >"$WORK/test_only/backends/aoti/tests/test_manifest.cpp"
expect payload_blob_despite_test 0 '^blob ' -- run payload-format --source "$WORK/test_only"
make_tree "$WORK/manifest"
echo 'constexpr char kMagic[] = "ETCUDAFQN3";' >"$WORK/manifest/backends/cuda/runtime/weights.cpp"
expect payload_manifest 0 '^manifest backends/cuda/runtime/weights.cpp reads the ETCUDAFQN3' \
  -- run payload-format --source "$WORK/manifest"

# pack-source keeps relative paths and leaves tests and Python behind.
make_tree "$WORK/full"
mkdir -p "$WORK/full/backends/aoti/tests" "$WORK/full/docs"
echo x >"$WORK/full/backends/aoti/tests/test_x.cpp"
echo x >"$WORK/full/backends/aoti/aoti_backend.py"
echo x >"$WORK/full/docs/unrelated.h"
echo 1.5.0 >"$WORK/full/version.txt"
expect pack_source 0 "packed 5 files" -- run pack-source --source "$WORK/full" --dest "$WORK/packed"
packed="$(cd "$WORK/packed" 2>/dev/null && find . -type f | sort | paste -sd' ')"
want="./backends/aoti/aoti_delegate_handle.h ./backends/aoti/common_shims_slim.cpp ./backends/cuda/runtime/cuda_backend.cpp ./extension/cuda/caller_stream.h ./version.txt"
expect pack_source_contents 0 "^ok$" -- bash -c '[[ "$1" == "$2" ]] && echo ok || echo "packed: $1"' _ "$packed" "$want"

echo "$passed passed, $failed failed"
[[ "$failed" -eq 0 ]]
