#!/usr/bin/env bash
# Run the stomp-proto demo (currently the codec round trip example).
#
#     bash scripts/demo.sh
#
# Creates ./.venv and installs the project into it when needed.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/_venv.sh
source scripts/_venv.sh
ensure_venv '.'

"$VENV_BIN/python" examples/codec_roundtrip.py
