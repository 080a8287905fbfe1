#!/usr/bin/env bash
# Run the main job: the stomp-proto demo against the embedded broker.
#
#     bash scripts/demo.sh
#
# Creates ./.venv and installs the project into it when needed.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/_venv.sh
source scripts/_venv.sh
ensure_venv '.'

"$VENV_BIN/python" -m stomp_proto demo "$@"
