"""``python -m reports.clean DIR [--dry-run]``: remove what the harness wrote into report directories.

Walks DIR and the directories below it (``make verify REPORT=reports/out/gpu`` nests one); in
each, removes the files its manifest (reports/manifest.py) lists, a kill cache, the writer's
left-over temporary files, then the manifest and the lock file, and the directory itself once
empty. Anything else (a user's notes beside the reports, say) stays, and is named; a directory
without a manifest is left alone. A directory
another harness command is writing into (its lock is held) is skipped. Stdlib only, so that
``make clean`` works without the project's environment.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import sys
from pathlib import Path

from reports import manifest


def _busy(folder: Path) -> bool:
    path = folder / manifest.LOCK
    if not path.is_file():
        return False
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _writer_temp(name: str, listed: dict) -> bool:
    """Whether ``name`` is one of reports/writer.py's temporary files: ``.<report name>.<random>.tmp``."""
    target = name[1:-len(".tmp")].rsplit(".", 1)[0]
    known = (manifest.KILL_CACHE, manifest.MANIFEST, ".harness-probe"[1:], *manifest.DERIVED)
    return target in listed or target in known or manifest.is_source(target)


def harness_files(folder: Path) -> list[Path]:
    """The files of ``folder`` (not below it) the harness wrote, its own bookkeeping last."""
    listed = manifest.read(folder)["files"]
    names = [n for n in listed if "/" not in n and n not in (manifest.MANIFEST, manifest.LOCK)]
    if manifest.KILL_CACHE not in names and manifest.owns(folder, manifest.KILL_CACHE):
        names.append(manifest.KILL_CACHE)
    temps = [p.name for p in folder.glob(".*.tmp") if _writer_temp(p.name, listed)]  # left by a killed run
    found = [folder / n for n in names + temps if (folder / n).is_file() and not (folder / n).is_symlink()]
    return found + [folder / n for n in (manifest.MANIFEST, manifest.LOCK) if (folder / n).is_file()]


def clean(root: Path, *, dry_run: bool = False, out=sys.stdout) -> int:
    if not root.is_dir():
        print(f"clean: {root}: nothing to remove", file=out)
        return 0
    for folder in sorted((Path(d) for d, _, _ in os.walk(root)), key=lambda p: len(p.parts), reverse=True):
        if not (folder / manifest.MANIFEST).exists() and not (folder / manifest.LOCK).exists():
            if folder == root and any(folder.iterdir()):  # no manifest: nothing here is known to be ours
                print(f"clean: {folder}: no {manifest.MANIFEST}, so nothing in it is known to be the harness's; "
                      "kept (remove it yourself if it only holds old reports)", file=out)
            continue
        if _busy(folder):
            print(f"clean: {folder}: skipped, a harness command is writing into it", file=out)
            continue
        for path in harness_files(folder):
            print(f"clean: {'would remove' if dry_run else 'removing'} {path}", file=out)
            if not dry_run:
                path.unlink()
        _rmdir(folder, dry_run)
        kept = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        if kept and not dry_run:
            print(f"clean: {folder}: kept {len(kept)} entr{'y' if len(kept) == 1 else 'ies'} the harness did not "
                  f"write: {', '.join(kept[:10])}{' ...' if len(kept) > 10 else ''}", file=out)
    return 0


def _rmdir(folder: Path, dry_run: bool) -> None:
    if dry_run or not folder.is_dir():
        return
    try:
        folder.rmdir()  # only when empty
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports.clean", description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")
    args = parser.parse_args(argv)
    return clean(args.directory, dry_run=args.dry_run)


if __name__ == "__main__":
    sys.exit(main())
