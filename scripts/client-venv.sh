#!/usr/bin/env bash
# The Python clients the interoperability tests run (Triton's tritonclient[grpc]), pinned in
# src/test/python/requirements.txt, in .venv-clients. Reinstalled only when the pins change.
# Prints the venv's python.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv=.venv-clients
req=src/test/python/requirements.txt
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$req" | cut -d' ' -f1)"
if [[ ! -x $venv/bin/python || "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$req" >&2
  echo "$want" > "$stamp"
fi
echo "$PWD/$venv/bin/python"
