#!/usr/bin/env bash
# Re-exports the models under models/ and src/test/resources/models/ from scratch.
# Needs network to PyPI the first time (torch is large); later runs reuse the venv.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${ETSERVE_EXPORT_VENV:-$ROOT/.venv-export}"
REQUIREMENTS="$ROOT/scripts/export/requirements.txt"
STAMP="$VENV/.etserve-export-requirements"

python_for_venv() {
  # The lock was made on 3.11; other versions may lack some pinned wheels.
  for p in python3.11 python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import venv' >/dev/null 2>&1; then
      echo "$p"; return
    fi
  done
  echo "[export] python3 with the venv module is required" >&2; exit 1
}

want="$(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)"
if [[ ! -f "$STAMP" || "$(cat "$STAMP")" != "$want" ]]; then
  echo "[export] installing $REQUIREMENTS into $VENV" >&2
  [[ -x "$VENV/bin/python" ]] || "$(python_for_venv)" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$REQUIREMENTS"
  echo "$want" > "$STAMP"
fi

# --venv: only make sure the venv is there and print its path (bench/peers runs ExecuTorch's
# Python runtime from it).
if [[ ${1:-} == --venv ]]; then
  echo "$VENV"
  exit 0
fi
cd "$ROOT"
exec "$VENV/bin/python" scripts/export/export_models.py "$@"
