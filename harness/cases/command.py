"""The words every printed command starts with: the console script by its full path, so that a
repro line runs as printed in any shell (whatever ``python`` is there) and from any directory."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

from harness.settings import PROJECT_ROOT

SCRIPT = "triton-verify"


@functools.lru_cache(maxsize=1)
def console_words() -> tuple[str, ...]:
    """This checkout's ``.venv/bin/triton-verify`` (``make setup``), else the script installed
    beside the running interpreter (``pip install``), else that interpreter's ``-m harness``."""
    for script in (PROJECT_ROOT / ".venv" / "bin" / SCRIPT, Path(sys.executable).parent / SCRIPT):
        if script.is_file() and os.access(script, os.X_OK):
            return (str(script),)
    return (sys.executable, "-m", "harness")


def absolute(path: str) -> str:
    """A path the user gave, made absolute so that the command runs from any directory."""
    return os.path.abspath(path)
