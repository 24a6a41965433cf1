#!/usr/bin/env bash
# Linkage gate: the bridge must take ExecuTorch's caller-stream API from the one shared
# library, never from a copy of its own. A second copy (static, or the same code under another
# soname) gives the process two thread-local selections: the runner sets one, the delegate
# reads the other, and nothing crashes. See NOTES.md §2-3.
#
#   check-linkage.sh --bridge FILE   a built bridge, resolved through its own RUNPATH
#   check-linkage.sh --dir DIR       a staged package: DIR/libetserve_jni.so and its libraries
#   check-linkage.sh --jar FILE      the jar's META-INF/etserve/native/linux-x86_64/, as --dir
#
# One PASS/FAIL line per check; exit status 1 if any check fails, 2 on bad usage.
# Tool output is captured into variables before matching: `nm | grep -q` can die of SIGPIPE.
set -uo pipefail

READELF="${READELF:-readelf}"
NM="${NM:-nm}"
JAR_NATIVE_DIR="META-INF/etserve/native/linux-x86_64"
BRIDGE_NAME="libetserve_jni.so"
# The library's names: built from ExecuTorch's extension/cuda (libextension_cuda.so) and as the
# CUDA wheel ships it (libexecutorch_extension_cuda.so, possibly with a major version).
CALLER_STREAM_SONAME_RE='^lib(executorch_)?extension_cuda\.so(\.[0-9]+)*$'
GET_CALLER_STREAM="_ZN10executorch9extension4cuda15getCallerStreamEv"
GUARD_CTOR_RE="_ZN10executorch9extension4cuda17CallerStreamGuardC[12]EP11CUstream_st"
GUARD_DTOR_RE="_ZN10executorch9extension4cuda17CallerStreamGuardD[12]Ev"
# Any symbol of the API, for "the bridge defines none of it".
API_SYMBOL_RE="_ZN10executorch9extension4cuda(15getCallerStream|17CallerStreamGuard)"

failures=0
pass() { printf 'PASS %s: %s\n' "$1" "$2"; }
fail() { printf 'FAIL %s: %s\n' "$1" "$2"; failures=$((failures + 1)); }
usage() { echo "usage: $0 --bridge FILE | --dir DIR | --jar FILE" >&2; exit 2; }

# Dynamic symbols of FILE, as nm prints them; empty when FILE is no ELF object.
dynamic_symbols() { "$NM" -D "$@" 2>/dev/null; }

# True when the nm listing in $1 defines GET_CALLER_STREAM (exported, any binding).
defines_get_caller_stream() {
  grep -Eq "^[0-9a-fA-F]+ [A-Za-z] ${GET_CALLER_STREAM}(@.*)?$" <<<"$1"
}

check_bridge() {
  local bridge="$1" package_dir="${2:-}"
  local dynamic needed=() name
  dynamic="$("$READELF" -dW "$bridge" 2>&1)"
  while IFS= read -r name; do
    [[ "$name" =~ $CALLER_STREAM_SONAME_RE ]] && needed+=("$name")
  done < <(sed -n 's/.*(NEEDED).*\[\(.*\)\].*/\1/p' <<<"$dynamic")

  local soname=""
  if ((${#needed[@]} == 1)); then
    soname="${needed[0]}"
    pass needed-caller-stream "$(basename "$bridge") NEEDs $soname"
  elif ((${#needed[@]} == 0)); then
    fail needed-caller-stream "$(basename "$bridge") has no NEEDED entry for libextension_cuda.so or libexecutorch_extension_cuda.so"
  else
    fail needed-caller-stream "$(basename "$bridge") NEEDs ${#needed[@]} caller-stream libraries (${needed[*]}), each with its own selection"
  fi

  local resolved=""
  if [[ -z "$soname" ]]; then
    fail ldd-resolves-caller-stream "nothing to resolve: no caller-stream NEEDED entry"
  else
    local ldd_out
    if [[ -n "$package_dir" ]]; then
      ldd_out="$(LD_LIBRARY_PATH="$package_dir" ldd "$bridge" 2>&1)"
    else
      ldd_out="$(env -u LD_LIBRARY_PATH ldd "$bridge" 2>&1)"
    fi
    resolved="$(sed -n "s|^[[:space:]]*${soname//./\\.} => \\(/[^ ]*\\) (0x.*|\\1|p" <<<"$ldd_out")"
    if [[ -z "$resolved" ]]; then
      fail ldd-resolves-caller-stream "ldd does not resolve $soname: $(grep -F "$soname" <<<"$ldd_out" || echo "$ldd_out")"
      resolved=""
    elif [[ -n "$package_dir" && "$(dirname "$(realpath "$resolved")")" != "$(realpath "$package_dir")" ]]; then
      fail ldd-resolves-caller-stream "$soname resolves to $resolved, outside the package $package_dir"
      resolved=""
    else
      pass ldd-resolves-caller-stream "$soname => $resolved"
    fi
  fi

  local imports missing=()
  imports="$(dynamic_symbols --undefined-only "$bridge")"
  grep -Eq "^ +U ${GET_CALLER_STREAM}(@.*)?$" <<<"$imports" || missing+=("getCallerStream")
  grep -Eq "^ +U ${GUARD_CTOR_RE}(@.*)?$" <<<"$imports" || missing+=("CallerStreamGuard::CallerStreamGuard")
  grep -Eq "^ +U ${GUARD_DTOR_RE}(@.*)?$" <<<"$imports" || missing+=("CallerStreamGuard::~CallerStreamGuard")
  if ((${#missing[@]} == 0)); then
    pass imports-caller-stream-api "$(basename "$bridge") imports getCallerStream and the CallerStreamGuard ctor and dtor"
  else
    fail imports-caller-stream-api "$(basename "$bridge") does not import ${missing[*]} (undefined dynamic symbols)"
  fi

  if [[ -n "$resolved" ]]; then
    if defines_get_caller_stream "$(dynamic_symbols --defined-only "$resolved")"; then
      pass caller-stream-exports-api "$resolved exports getCallerStream"
    else
      fail caller-stream-exports-api "$resolved does not export getCallerStream"
    fi
  else
    fail caller-stream-exports-api "no resolved caller-stream library to inspect"
  fi

  # Dynamic symbols, not .symtab: a stripped copy still has them, and only they can bind.
  local own_definitions
  own_definitions="$(grep -E "^[0-9a-fA-F]+ [A-Za-z] ${API_SYMBOL_RE}" <<<"$(dynamic_symbols --defined-only "$bridge")")"
  if [[ -z "$own_definitions" ]]; then
    pass bridge-defines-no-caller-stream-symbol "$(basename "$bridge") defines none of the caller-stream API"
  else
    fail bridge-defines-no-caller-stream-symbol "$(basename "$bridge") defines its own copy: $(awk '{print $3}' <<<"$own_definitions" | tr '\n' ' ')"
  fi

  RESOLVED_CALLER_STREAM="$resolved"
}

# Every ELF object in the package, whatever its name, that defines getCallerStream dynamically.
check_single_definer() {
  local dir="$1" file real definers=() seen=" "
  while IFS= read -r -d '' file; do
    real="$(realpath "$file")"
    [[ "$seen" == *" $real "* ]] && continue
    seen+="$real "
    if defines_get_caller_stream "$(dynamic_symbols --defined-only "$file")"; then
      definers+=("$real")
    fi
  done < <(find -L "$dir" -type f -print0)

  if ((${#definers[@]} == 1)); then
    if [[ -n "$RESOLVED_CALLER_STREAM" && "${definers[0]}" != "$(realpath "$RESOLVED_CALLER_STREAM")" ]]; then
      fail one-caller-stream-in-package "the only definer ${definers[0]} is not the library the bridge loads ($RESOLVED_CALLER_STREAM)"
    else
      pass one-caller-stream-in-package "exactly one file defines getCallerStream: $(basename "${definers[0]}")"
    fi
  else
    fail one-caller-stream-in-package "${#definers[@]} files define getCallerStream, exactly one must: ${definers[*]:-none}"
  fi
}

# The delegates the package loads after the bridge (delegates.list: the CUDA wheel's CudaBackend
# and its AOTI shims): each present, resolving the runtime from the package's libexecutorch.so
# (a static copy registers into a second registry) and the caller stream from the package's
# one library.
check_delegates() {
  local dir="$1" list="$1/delegates.list" name needed bridge_cs cs
  [[ -f "$list" ]] || return 0
  bridge_cs="$(basename "${RESOLVED_CALLER_STREAM:-none}")"
  while IFS= read -r name; do
    [[ -n "$name" ]] || continue
    if [[ ! -f "$dir/$name" ]]; then
      fail delegate-present "delegates.list names $name, which is not in the package"
      continue
    fi
    needed="$("$READELF" -W --dynamic "$dir/$name" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')"
    if [[ "$name" == *backend* ]] && ! grep -qx 'libexecutorch.so' <<<"$needed"; then
      fail delegate-shared-runtime "$name does not NEED libexecutorch.so: its runtime would be a second registry"
    fi
    cs="$(grep -E "$CALLER_STREAM_SONAME_RE" <<<"$needed" || true)"
    if [[ -n "$cs" && "$cs" != "$bridge_cs" ]]; then
      fail delegate-caller-stream "$name NEEDs $cs, the bridge loads $bridge_cs: two stream selections"
    elif [[ -n "$cs" ]]; then
      pass delegate-caller-stream "$name NEEDs the package's $cs"
    fi
    if grep -Eq "$API_SYMBOL_RE" <<<"$(dynamic_symbols --defined-only "$dir/$name")"; then
      fail delegate-defines-no-caller-stream-symbol "$name defines its own copy of the caller-stream API"
    else
      pass delegate-defines-no-caller-stream-symbol "$name defines none of the caller-stream API"
    fi
  done < "$list"
}

check_dir() {
  local dir="$1"
  if [[ ! -f "$dir/$BRIDGE_NAME" ]]; then
    fail bridge-present "$dir has no $BRIDGE_NAME"
    return
  fi
  check_bridge "$dir/$BRIDGE_NAME" "$dir"
  check_single_definer "$dir"
  check_delegates "$dir"
}

(($# == 2)) || usage
mode="$1" target="$2"
[[ -e "$target" ]] || { echo "no such file or directory: $target" >&2; exit 2; }
# Absolute, so that LD_LIBRARY_PATH and ldd's answers are absolute too.
target="$(realpath "$target")"
RESOLVED_CALLER_STREAM=""
case "$mode" in
  --bridge)
    [[ -f "$target" ]] || { echo "no such file: $target" >&2; exit 2; }
    check_bridge "$target"
    ;;
  --dir)
    [[ -d "$target" ]] || { echo "no such directory: $target" >&2; exit 2; }
    check_dir "$target"
    ;;
  --jar)
    [[ -f "$target" ]] || { echo "no such file: $target" >&2; exit 2; }
    extracted="$(mktemp -d)"
    trap 'rm -rf "$extracted"' EXIT
    if command -v unzip >/dev/null 2>&1; then
      unzip -q "$target" "$JAR_NATIVE_DIR/*" -d "$extracted" >/dev/null 2>&1
    else
      python3 -c 'import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith(sys.argv[3] + "/")])' \
        "$target" "$extracted" "$JAR_NATIVE_DIR"
    fi
    if [[ ! -d "$extracted/$JAR_NATIVE_DIR" ]]; then
      fail jar-has-natives "$target has no $JAR_NATIVE_DIR/"
    else
      check_dir "$extracted/$JAR_NATIVE_DIR"
    fi
    ;;
  *) usage ;;
esac

if ((failures > 0)); then
  echo "linkage gate: $failures check(s) failed" >&2
  exit 1
fi
echo "linkage gate: all checks passed"
