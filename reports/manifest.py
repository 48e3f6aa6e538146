"""Which files of a report directory the harness wrote: ``DIR/.harness-manifest.json``.

Every file the harness writes into a report directory (reports/writer.py) is listed here with
the run that wrote it. The list decides three things:

* only listed files are ever overwritten or removed: a user's own ``summary.md`` in the
  directory is refused, never replaced (``ForeignFileError``);
* writing a source report (verify.json, mutation.json, ...) removes the rendered files
  (index.html, junit.xml, summary.md) of the earlier sources, so a PASS summary never stands
  beside a newer FAIL verify.json; ``python -m harness report`` renders them again from the
  JSON present;
* ``make clean`` (reports/clean.py) removes listed files only.

The kill cache (kill_cache.json) is harness-written too: CI restores it from its cache without
the manifest, so a file there that reads as a kill cache counts as the harness's.
Stdlib only: reports never import the engine.
"""

from __future__ import annotations

import datetime
import fnmatch
import json
import os
import tempfile
from pathlib import Path

__all__ = [
    "MANIFEST", "LOCK", "DERIVED", "KILL_CACHE", "ForeignFileError", "begin_run", "run_info", "read",
    "owns", "foreign", "record", "invalidate_derived", "is_source", "stale_sources",
]

MANIFEST = ".harness-manifest.json"
LOCK = ".harness-lock"
DERIVED = ("index.html", "junit.xml", "summary.md")
KILL_CACHE = "kill_cache.json"
# what index.html, junit.xml and summary.md are rendered from (sanitize.json is not rendered)
SOURCES = ("verify.json", "mutation.json", "train_check.json", "exercise.json", "bench_*.json", "bench_*.png")
FORMAT = 1
GROUP_ENV = "HARNESS_RUN_GROUP"

_run: dict | None = None


class ForeignFileError(FileExistsError):
    """A file the harness would write exists but was not written by the harness."""


def begin_run(command: str) -> dict:
    """Name this process's run (one harness command); every file it writes is listed under it."""
    global _run
    now = datetime.datetime.now(datetime.timezone.utc)
    run_id = f"{now.strftime('%Y%m%dT%H%M%S.%f')}-{os.getpid()}"
    # the commands of one `make verify` share a group (the Makefile exports HARNESS_RUN_GROUP), so
    # its verify.json and mutation.json render together while a JSON of an older run is marked stale
    _run = {"id": run_id, "group": os.environ.get(GROUP_ENV) or run_id, "command": command,
            "started": now.isoformat(timespec="seconds")}
    return _run


def run_info() -> dict:
    return _run or begin_run("python")


def is_source(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in SOURCES)


def read(directory: str | Path) -> dict:
    """The manifest of DIR; an empty one when absent or unreadable (then nothing counts as ours)."""
    try:
        data = json.loads((Path(directory) / MANIFEST).read_text())
    except (OSError, ValueError):
        return {"format": FORMAT, "files": {}}
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
        return {"format": FORMAT, "files": {}}
    return data


def _is_kill_cache(path: Path) -> bool:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("format") == 1 and isinstance(data.get("backends"), dict)


def owns(directory: str | Path, name: str, manifest: dict | None = None) -> bool:
    """Whether the harness wrote DIR/name (or it does not exist, so nothing of a user's is at stake)."""
    path = Path(directory) / name
    if not path.exists() and not path.is_symlink():
        return True
    if path.is_symlink() or not path.is_file():
        return False  # a link or a folder under a report's name is the user's
    if name in (manifest or read(directory))["files"]:
        return True
    return name == KILL_CACHE and _is_kill_cache(path)


def foreign(directory: str | Path, names) -> list[Path]:
    """The files among ``names`` that exist in DIR but were not written by the harness."""
    manifest = read(directory)
    return [Path(directory) / n for n in names if not owns(directory, n, manifest)]


def refusal(path: Path) -> str:
    return (f"{path} exists but was not written by the harness (it is not listed in "
            f"{path.parent / MANIFEST}); move it away or choose another --report-dir")


def _save(directory: Path, data: dict) -> None:
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f"{MANIFEST}.", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(data, indent=1, allow_nan=False) + "\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, directory / MANIFEST)


def record(directory: str | Path, name: str, **extra) -> None:
    """List DIR/name as written by this run."""
    record_many(directory, [name], **extra)


def record_many(directory: str | Path, names, **extra) -> None:
    """List every DIR/name of ``names`` as written by this run, in one rewrite of the manifest
    (one rewrite per file is quadratic: a campaign's 2000 saved outcomes took minutes)."""
    folder = Path(directory)
    data = read(folder)
    run = run_info()
    data["format"] = FORMAT
    data["run"] = run  # the last run that wrote here
    written = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds")
    for name in names:
        data["files"][name] = {"run": run["id"], "group": run["group"], "command": run["command"],
                               "written": written, **extra}
    _save(folder, data)


def invalidate_derived(directory: str | Path) -> list[Path]:
    """Remove the rendered reports the harness wrote from earlier sources; return what went."""
    folder = Path(directory)
    data = read(folder)
    gone, changed = [], False
    for name in DERIVED:
        if name not in data["files"]:
            continue  # not ours (or absent): a user's file is never removed
        path = folder / name
        if path.is_file() and not path.is_symlink():
            path.unlink()
            gone.append(path)
        del data["files"][name]
        changed = True
    if changed:
        _save(folder, data)
    return gone


def stale_sources(directory: str | Path) -> dict[str, str]:
    """Source reports in DIR written by an earlier run than the newest source, name -> why.

    Runs of one group (one ``make verify``) are one run. Sources the harness did not write here
    (copied in, say) are not judged: nothing says when they were made."""
    listed = {n: e for n, e in read(directory)["files"].items()
              if is_source(n) and n.endswith(".json") and (Path(directory) / n).is_file()}
    if not listed:
        return {}
    newest_name, newest = max(listed.items(), key=lambda item: item[1].get("written", ""))
    group = newest.get("group", newest.get("run"))
    return {n: f"STALE: written by an earlier run ({e.get('command', '?')} at {e.get('written', '?')}) "
               f"than {newest_name} ({newest.get('command', '?')} at {newest.get('written', '?')})"
            for n, e in listed.items() if e.get("group", e.get("run")) != group}
