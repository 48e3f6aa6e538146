"""Write a report file atomically: a reader never sees half a file, and only our file changes."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def write_json(directory: str | Path, name: str, data: dict) -> Path:
    return write_text(directory, name, json.dumps(data, indent=1, allow_nan=True) + "\n")


def write_text(directory: str | Path, name: str, text: str) -> Path:
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)  # mkstemp makes 0600; reports are meant to be read and served
    os.replace(tmp, target)
    return target
