#!/usr/bin/env bash
# Prepare .venv/bin/python, the interpreter every Makefile target uses, and .venv/bin/triton-verify,
# the command every printed repro line starts with. Idempotent.
#  - If .venv/bin/python already imports what the harness needs: only the project itself is
#    installed (editable, see install_project).
#  - If the machine's python3 already has torch, triton, hypothesis and pytest (the GPU image,
#    whose python3 is itself a virtual environment and which has no network): reuse it through
#    a small wrapper script that puts the checkout on PYTHONPATH. A symlink would lose that
#    interpreter's environment, a --system-site-packages venv made from it does not see its
#    packages, and installing into it would change a machine-wide interpreter.
#  - Otherwise: a real venv with the CPU build of torch that lies on disk, and the rest from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
MODULES="torch triton hypothesis pytest xdist rich jinja2 matplotlib yaml"
NEEDED="import ${MODULES// /, }"
# Fast path (every make target runs this): a full import of the packages succeeded once with this
# script and this pyproject.toml (the stamp), each is still installed (find_spec, no import: 0.1 s
# instead of 3 s) and so is the console script.
STAMP=.venv/.setup-ok
SIG="$(cat scripts/setup_env.sh pyproject.toml | cksum)"
FOUND="import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in sys.argv[1:]))"
if [ -x .venv/bin/python ] && [ -x .venv/bin/triton-verify ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$SIG" ] \
   && .venv/bin/python -c "$FOUND" $MODULES 2>/dev/null; then
    exit 0
fi

# `import harness` from any directory and .venv/bin/triton-verify. In a real venv: an editable
# install that needs no network (no dependencies, no build isolation); where pip cannot make one
# (no setuptools), a .pth file naming the checkout. Beside the wrapper interpreter, whose
# PYTHONPATH holds the checkout, and after a failed install: a script that runs `python -m harness`.
install_project() {
    rm -f .venv/bin/triton-verify
    if [ -f .venv/pyvenv.cfg ]; then
        if .venv/bin/python -m pip install -q -e . --no-deps --no-build-isolation >.venv/install.log 2>&1 \
           && [ -x .venv/bin/triton-verify ]; then
            return
        fi
        echo "setup: pip could not install the project (.venv/install.log); using a .pth file and a wrapper script"
        site="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
        echo "$ROOT" > "$site/triton_verify_checkout.pth"
    fi
    printf '#!/bin/sh\nPYTHONPATH="%s${PYTHONPATH:+:$PYTHONPATH}" exec "%s/.venv/bin/python" -m harness "$@"\n' \
        "$ROOT" "$ROOT" > .venv/bin/triton-verify
    chmod +x .venv/bin/triton-verify
}

if [ -x .venv/bin/python ] && .venv/bin/python -c "$NEEDED" 2>/dev/null; then
    install_project
    echo "$SIG" > "$STAMP"
    exit 0
fi
SYS_PY="${PYTHON:-python3}"
if "$SYS_PY" -c "$NEEDED" 2>/dev/null; then
    real="$("$SYS_PY" -c 'import sys; print(sys.executable)')"
    rm -rf .venv && mkdir -p .venv/bin
    printf '#!/bin/sh\nPYTHONPATH="%s${PYTHONPATH:+:$PYTHONPATH}" exec "%s" "$@"\n' "$ROOT" "$real" > .venv/bin/python
    chmod +x .venv/bin/python
    install_project
    echo "$SIG" > "$STAMP"
    echo "setup: reusing $real (it already has torch, triton, hypothesis, pytest)"
    exit 0
fi
echo "setup: creating .venv (torch 2.13.0 CPU build, triton, hypothesis, pytest, pytest-xdist, rich, jinja2, matplotlib, pyyaml)"
rm -rf .venv
"$SYS_PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "torch==2.13.0" "triton==3.9.0"
.venv/bin/python -m pip install -q "setuptools>=68" "hypothesis>=6.100" "pytest>=8" "pytest-xdist>=3.5" "rich>=13" "jinja2>=3.1" "matplotlib>=3.7" "pyyaml>=6"
.venv/bin/python -c "$NEEDED"
install_project
echo "$SIG" > "$STAMP"
echo "setup: .venv ready"
