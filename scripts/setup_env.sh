#!/usr/bin/env bash
# Prepare .venv/bin/python, the interpreter every Makefile target uses. Idempotent.
#  - If .venv/bin/python already imports what the harness needs: nothing to do.
#  - If the machine's python3 already has torch, triton, hypothesis and pytest (the GPU image,
#    whose python3 is itself a virtual environment and which has no network): reuse it through
#    a small wrapper script. A symlink would lose that interpreter's environment, and a
#    --system-site-packages venv made from it does not see its packages.
#  - Otherwise: a real venv with the CPU build of torch that lies on disk, and the rest from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
MODULES="torch triton hypothesis pytest xdist rich jinja2 matplotlib yaml"
NEEDED="import ${MODULES// /, }"
# Fast path (every make target runs this): a full import of the packages succeeded once with this
# script (the stamp) and each is still installed (find_spec, no import: 0.1 s instead of 3 s).
STAMP=.venv/.setup-ok
SIG="$(cksum < scripts/setup_env.sh)"
FOUND="import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in sys.argv[1:]))"
if [ -x .venv/bin/python ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$SIG" ] && .venv/bin/python -c "$FOUND" $MODULES 2>/dev/null; then
    exit 0
fi
if [ -x .venv/bin/python ] && .venv/bin/python -c "$NEEDED" 2>/dev/null; then
    echo "$SIG" > "$STAMP"
    exit 0
fi
SYS_PY="${PYTHON:-python3}"
if "$SYS_PY" -c "$NEEDED" 2>/dev/null; then
    real="$("$SYS_PY" -c 'import sys; print(sys.executable)')"
    rm -rf .venv && mkdir -p .venv/bin
    printf '#!/bin/sh\nexec "%s" "$@"\n' "$real" > .venv/bin/python
    chmod +x .venv/bin/python
    echo "$SIG" > "$STAMP"
    echo "setup: reusing $real (it already has torch, triton, hypothesis, pytest)"
    exit 0
fi
echo "setup: creating .venv (torch 2.13.0 CPU build, triton, hypothesis, pytest, pytest-xdist, rich, jinja2, matplotlib, pyyaml)"
rm -rf .venv
"$SYS_PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "torch==2.13.0" "triton==3.9.0"
.venv/bin/python -m pip install -q "hypothesis>=6.100" "pytest>=8" "pytest-xdist>=3.5" "rich>=13" "jinja2>=3.1" "matplotlib>=3.7" "pyyaml>=6"
.venv/bin/python -c "$NEEDED"
echo "$SIG" > "$STAMP"
echo "setup: .venv ready"
