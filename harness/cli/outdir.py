"""The report directory of a command: checked, locked and listed before any work starts.

``session`` runs around every subcommand that has ``--report-dir`` (harness/cli/__init__.py):

* the directory must be a directory the harness can write into (created if missing); a read-only
  directory or a path that is a file is one line and exit 2, before torch is even imported;
* ``DIR/.harness-lock`` is held with ``flock`` for the whole command: a second command on the
  same directory is refused (exit 2) with the first one's pid and command line, so two runs never
  mix their files and a failing run never points at a file holding another run's PASS;
* the report files the command may write must be the harness's own (reports/manifest.py): a
  user's ``summary.md`` is named and refused, not overwritten.

``signals_held`` defers Ctrl-C and SIGTERM while a set of report files is written, so the set is
whole (or, if the process dies another way, the rendered files are absent, never stale).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shlex
import signal
import sys
import tempfile
import threading
from pathlib import Path

from harness.errors import UsageError
from reports import manifest

# the source report each command writes (besides the rendered DERIVED files it may refresh)
SOURCES = {
    "verify": ["verify.json"],
    "mutate": ["mutation.json"],
    "train-check": ["train_check.json"],
    "exercise": ["exercise.json"],
    "sanitize": ["sanitize.json"],
}


def _written(command: str, args: argparse.Namespace) -> list[str]:
    names = list(SOURCES.get(command, []))
    if command == "bench":
        names += [f"bench_{args.op}.json", f"bench_{args.op}.png"]
    if command == "mutate" and getattr(args, "kill_cache", None) is None:
        names.append(manifest.KILL_CACHE)
    if command == "sanitize":
        return names  # its report is not rendered: index.html and the rest stay as they are
    return names + list(manifest.DERIVED)


def check_writable(folder: Path) -> None:
    """Exit 2 (UsageError) unless files can be created in ``folder`` (made if missing)."""
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--report-dir {folder} is a file, not a directory; give a directory (it is created if missing)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".harness-probe.", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UsageError(f"--report-dir {folder} is not writable ({exc.strerror or exc}); "
                         "choose a directory you can write to") from None


def _holder(fd: int) -> str:
    try:
        data = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
        return f"pid {data.get('pid', '?')}: {data.get('command', '?')}, since {data.get('started', '?')}"
    except (OSError, ValueError, AttributeError):
        return "a process that did not say who it is"


def lock(folder: Path, command: str) -> int:
    """Hold DIR/.harness-lock until the process ends (or ``release``); refuse if another run holds it."""
    path = folder / manifest.LOCK
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise UsageError(f"--report-dir {folder}: cannot open the lock file {path} ({exc.strerror or exc})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        who = _holder(fd)
        os.close(fd)
        raise UsageError(f"--report-dir {folder} is in use by another harness run ({who}); "
                         "wait for it to finish or give this run another --report-dir") from None
    run = manifest.begin_run(command)
    me = {"pid": os.getpid(), "command": shlex.join(["python", "-m", "harness", *sys.argv[1:]]),
          "started": run["started"], "run": run["id"]}
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(me).encode(), 0)
    return fd


def release(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


def _missing(folder: Path) -> list[Path]:
    """``folder`` and those of its parents that do not exist yet, deepest first."""
    missing = []
    for path in (folder, *folder.parents):
        if path.exists():
            break
        missing.append(path)
    return missing


def _tidy(created: list[Path]) -> None:
    """Remove the directories this run created if it wrote nothing into them (a usage error,
    say): a refused command leaves no trace."""
    if not created or any(p.name != manifest.LOCK for p in created[0].iterdir()):
        return
    with contextlib.suppress(OSError):
        (created[0] / manifest.LOCK).unlink()
        for path in created:
            path.rmdir()


@contextlib.contextmanager
def session(args: argparse.Namespace, command: str):
    folder = Path(args.report_dir)
    created = _missing(folder)
    check_writable(folder)
    fd = lock(folder, command)
    try:
        bad = manifest.foreign(folder, _written(command, args))
        if bad:
            raise UsageError(manifest.refusal(bad[0]))
        yield folder
    finally:
        release(fd)
        _tidy(created)


@contextlib.contextmanager
def signals_held():
    """Ctrl-C and SIGTERM wait until the block ends, then act as they would have.

    Python runs signal handlers in the main thread whichever thread the signal reached (torch's
    worker threads included, which a per-thread signal mask would miss), so swapping the handlers
    for one that only notes the signal defers it reliably."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    held = (signal.SIGINT, signal.SIGTERM)
    before = {s: signal.signal(s, lambda signum, frame: pending.append(signum)) for s in held}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
        if pending:
            print("interrupt received while the reports were written: they were completed first", file=sys.stderr)
            signal.raise_signal(pending[0])
