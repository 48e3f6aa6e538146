"""A detached ``git worktree`` of one revision in a temporary directory, removed afterwards.

The user's checkout is never touched: the worktree lives under the system's temp directory
and is removed (``git worktree remove --force``, then ``prune``) on every way out of the
block, an error or Ctrl-C included.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

from harness.errors import UsageError


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)


def repo_root(path: Path) -> Path:
    """The top of the git repository ``path`` lies in (a UsageError if none)."""
    found = _git(path if path.is_dir() else path.parent, "rev-parse", "--show-toplevel")
    if found.returncode != 0:
        raise UsageError(f"--baseline needs a git repository, but {path} is not in one")
    return Path(found.stdout.strip())


@contextlib.contextmanager
def checkout(rev: str, repo: Path) -> Iterator[tuple[Path, str]]:
    """(worktree path, full commit id) of ``rev`` of ``repo``, for the duration of the block."""
    resolved = _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if resolved.returncode != 0:
        raise UsageError(f"--baseline {rev!r} is not a revision of the repository at {repo}")
    commit = resolved.stdout.strip()
    parent = Path(tempfile.mkdtemp(prefix="harness-baseline-"))
    tree = parent / "base"
    added = _git(repo, "worktree", "add", "--detach", "--quiet", str(tree), commit)
    if added.returncode != 0:
        shutil.rmtree(parent, ignore_errors=True)
        raise UsageError(f"--baseline {rev!r}: git worktree add failed: {added.stderr.strip()}")
    try:
        yield tree, commit
    finally:
        _git(repo, "worktree", "remove", "--force", str(tree))
        shutil.rmtree(parent, ignore_errors=True)
        _git(repo, "worktree", "prune")
