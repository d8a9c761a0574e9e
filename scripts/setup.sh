#!/usr/bin/env bash
# Creates .venv with the pinned stack (constraints.txt). torch is installed first, alone, at its pin there, so
# that pip takes the CPU build instead of resolving a bare "torch" to a multi-GB CUDA build.
# Re-running is cheap: nothing is reinstalled unless pyproject.toml or constraints.txt changed.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-test}"
stamp=".venv/.installed-$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)-${extras//,/_}"
if [ -e "$stamp" ]; then
    exit 0
fi
# PYTHON picks the interpreter. On a Trainium host (the Neuron SDK under /opt/aws/neuron) the torch-neuronx
# 2.14 wheels need Python 3.12 or newer, so the venv must be made with one. Elsewhere the distribution's
# /usr/bin/python3 is preferred when it is 3.10+ with venv: distributions build CPython with PGO and LTO, a
# default pyenv build without; a try ran 14 % faster on Debian's 3.11 (docs/contributing/testing.md says how).
default_python() {
    if [ ! -d /opt/aws/neuron ] && [ -x /usr/bin/python3 ] &&
        /usr/bin/python3 -c 'import sys, venv, ensurepip; sys.exit(sys.version_info[:2] < (3, 10))' 2>/dev/null; then
        echo /usr/bin/python3
    else
        echo python3
    fi
}
python="${PYTHON:-$(default_python)}"
if [ ! -x .venv/bin/python ]; then
    if [ -d /opt/aws/neuron ] && ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 12))'; then
        echo "this is a Trainium host: torch-neuronx needs Python 3.12+, but $python is $("$python" -V 2>&1);" \
            "run with PYTHON=python3.12 (or newer)" >&2
        exit 2
    fi
    "$python" -m venv .venv
fi
torch_pin="$(grep -E '^torch==' constraints.txt)"
echo "setting up .venv (${torch_pin/==/ } CPU, transformers, trl, peft, libcst, ...); takes about 2 minutes" >&2
.venv/bin/python -m pip install --quiet --disable-pip-version-check "$torch_pin"
.venv/bin/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[${extras}]"
# The neuron stand-in's C++ backend, compiled once here rather than in the first process that switches it on.
if [[ ",${extras}," == *",test,"* || ",${extras}," == *",compat,"* || ",${extras}," == *",ray,"* ]]; then
    .venv/bin/python -m standin.native >/dev/null
fi
rm -f .venv/.installed-*
touch "$stamp"
