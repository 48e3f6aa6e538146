"""Rendered figures kept beside the report, by a digest of what they are drawn from.

Drawing the kill matrix and the error plots is most of the time ``report`` takes (seconds,
against milliseconds for the rest of the page), and an incremental gate in which nothing
changed draws the same figures from the same records again. A figure's digest covers its
function's name, the data it is drawn from, the source of the module that draws it and the
matplotlib version, so any change there draws anew. The files (``DIR/incremental/plot-*.b64``)
are listed in that folder's manifest, so ``make clean`` removes them; after each rendering the
ones it did not use are removed, so the cache holds one page's figures.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import tempfile
from pathlib import Path
from typing import Callable

from reports import manifest

__all__ = ["PlotCache"]

FOLDER = "incremental"
PREFIX = "plot-"


def _version() -> str:
    """matplotlib's version, read from its installed metadata (importing it costs about 1 s)."""
    from importlib import metadata

    try:
        return metadata.version("matplotlib")
    except metadata.PackageNotFoundError:
        return "none"


class PlotCache:
    """``draw(fn, *args)``: ``fn(*args)`` (a base64 PNG or None), from the cache when it holds it."""

    def __init__(self, directory: str | Path | None):
        self.folder = Path(directory) / FOLDER if directory is not None else None
        self.used: set[str] = set()

    def _key(self, fn: Callable, args: tuple) -> str:
        h = hashlib.sha256()
        h.update(f"{fn.__module__}.{fn.__qualname__}\n{_version()}\n".encode())
        h.update(inspect.getsource(inspect.getmodule(fn)).encode())
        h.update(json.dumps(args, sort_keys=True, default=str).encode())
        return h.hexdigest()[:24]

    def draw(self, fn: Callable, *args) -> str | None:
        if self.folder is None:
            return fn(*args)
        name = f"{PREFIX}{self._key(fn, args)}.b64"
        self.used.add(name)
        path = self.folder / name
        if manifest.owns(self.folder, name):
            try:
                text = path.read_text()
            except OSError:
                pass
            else:
                return text or None
        png = fn(*args)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".b64")
            with os.fdopen(fd, "w") as f:
                f.write(png or "")
            os.replace(tmp, path)
            manifest.record(self.folder, name)
        except OSError:  # a cache that cannot be written costs time, never the page
            pass
        return png

    def prune(self) -> None:
        """Remove the cached figures this rendering did not use (only files the harness listed)."""
        if self.folder is None or not self.folder.is_dir():
            return
        for path in self.folder.glob(f"{PREFIX}*.b64"):
            if path.name not in self.used and manifest.owns(self.folder, path.name):
                path.unlink(missing_ok=True)
