#!/usr/bin/env bash
# The whole test suite, from a fresh machine: the README's test command (CI runs it via .ci/run).
#
#   bash scripts/test.sh [extra mvn args]
#
# It starts a local container engine when none answers (Debian's docker.io, as root) and makes
# the locally built base images the image test needs, then runs `mvn verify`: the native build
# (pinned venv, CMake), the C++ tests (ctest) and the linkage gate, the Java unit and
# integration tests on the real ExecuTorch runtime, the Helm chart tests, the packaged jar's
# linkage gate, and the Testcontainers test of the real image.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash .ci/container-engine.sh start
bash .ci/base-images.sh
eval "$(bash .ci/container-engine.sh env)"

exec mvn -B -ntp verify "$@"
