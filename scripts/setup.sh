#!/usr/bin/env bash
# Creates .venv with the pinned stack. torch is installed first, alone, so that pip takes the CPU
# build of 2.13.0 instead of resolving a bare "torch" to a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-test}"
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet "torch==2.13.0"
.venv/bin/python -m pip install --quiet -c constraints.txt -e ".[${extras}]"
