"""The incremental store: one JSON file per key under ``DIR/incremental/``.

A payload is whatever the step needs to stand in for a rerun (a kernel's records and summary,
a mutant's outcome), saved with the date it was computed and the parts of its key, so a report
can say what was reused and from when. Only complete results are saved: an interrupted or
crashed run is never kept. Files are written atomically; an unreadable one is a miss. Each file
is listed in the folder's .harness-manifest.json (reports/manifest.py), so ``make clean``
removes the store and nothing else.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import tempfile
from pathlib import Path

SUBDIR = "incremental"


class Store:
    def __init__(self, report_dir: str | Path, *, enabled: bool = True, reuse: bool = True):
        """``enabled=False``: neither read nor write; ``reuse=False`` (--no-cache): a whole run
        that reads nothing but saves what it computes, for the next run to reuse."""
        self.folder = Path(report_dir) / SUBDIR
        self.enabled = enabled
        self.reuse = reuse
        self._unlisted: list[str] | None = None  # inside batch(): files written, listed at its end

    def _path(self, kind: str, key: str) -> Path:
        return self.folder / f"{kind}-{key}.json"

    def get(self, kind: str, key: str) -> dict | None:
        """The saved payload (with ``saved_at``) or None."""
        if not (self.enabled and self.reuse):
            return None
        try:
            data = json.loads(self._path(kind, key).read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and "payload" in data else None

    def peek(self, kind: str, key: str) -> dict | None:
        """Like ``get``, read even under --no-cache (for saying what changed, never to reuse)."""
        reuse, self.reuse = self.reuse, True
        try:
            return self.get(kind, key)
        finally:
            self.reuse = reuse

    def put(self, kind: str, key: str, payload: dict, parts: dict) -> None:
        if not self.enabled:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        data = {"key": key, "parts": parts, "saved_at": now(), "payload": payload}
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, default=str)
        os.replace(tmp, self._path(kind, key))
        # listed in the folder's own manifest: `make clean` removes it, and the folder (cached by CI
        # with its manifest) is the harness's
        if self._unlisted is not None:
            self._unlisted.append(self._path(kind, key).name)
        else:
            self._list([self._path(kind, key).name])

    @contextlib.contextmanager
    def batch(self):
        """Puts inside the block are listed in the manifest once, at its end (also on an error or
        Ctrl-C): saving a campaign's outcomes one manifest rewrite each was quadratic."""
        outer = self._unlisted is not None
        if not outer:
            self._unlisted = []
        try:
            yield self
        finally:
            if not outer:
                names, self._unlisted = self._unlisted, None
                if names:
                    self._list(names)

    def _list(self, names: list[str]) -> None:
        from reports import manifest

        manifest.record_many(self.folder, names)


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
