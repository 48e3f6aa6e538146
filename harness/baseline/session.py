"""``verify --baseline REV``: the base worktree, its kernels, and which head kernel pairs with which.

Pairs: the head kernel ``X`` with the base's ``X``; a head kernel with no base kernel of its
name is paired with a base kernel of the same op defined by a function of the same module
and name (``renamed``); what is left is ``added`` (head only) or ``removed`` (base only).
"""

from __future__ import annotations

import contextlib
import inspect
import os
import subprocess
from pathlib import Path
from typing import Iterator

from harness.baseline.load import BASE_PREFIX, PROJECT_PACKAGE, SOURCES_ENV, load_base, source, sources_to_env
from harness.baseline.worktree import checkout, repo_root
from harness.errors import UsageError

AUTOLOAD = "harness.baseline.autoload"


def _where(entry) -> tuple[str, str, str]:
    """(op, the defining file's stem, function name): the same for a kernel in the head and in the
    base, whatever name each module is imported under."""
    fn = inspect.unwrap(entry.fn)
    try:
        module = Path(inspect.getsourcefile(fn) or "").stem
    except TypeError:  # a builtin or a callable object
        module = ""
    module = module or (getattr(fn, "__module__", "") or "").rsplit(".", 1)[-1]
    return entry.op, module, getattr(fn, "__name__", "")


def pair(head: list, base: list) -> dict:
    """``{pairs: {head name: base entry name}, added, removed, renamed}``."""
    by_name = {(e.op, e.name.removeprefix(BASE_PREFIX)): e for e in base}
    by_where = {_where(e): e for e in base}
    pairs, added, renamed, used = {}, [], [], set()
    for e in head:
        match = by_name.get((e.op, e.name)) or by_where.get(_where(e))
        if match is None or match.name in used:
            added.append({"op": e.op, "name": e.name})
            continue
        used.add(match.name)
        pairs[(e.op, e.name)] = match.name
        old = match.name.removeprefix(BASE_PREFIX)
        if old != e.name:
            renamed.append({"op": e.op, "from": old, "to": e.name})
    removed = [{"op": e.op, "name": e.name.removeprefix(BASE_PREFIX)} for e in base if e.name not in used]
    return {"pairs": pairs, "added": added, "removed": removed, "renamed": renamed}


def project_root() -> Path:
    """The repository of the ``kernels`` package the registry loads (found without importing it)."""
    import importlib.util

    from harness.registry.discovery import KERNELS

    spec = importlib.util.find_spec(KERNELS)
    return repo_root(Path(spec.origin).resolve().parent)


def _repositories(plugins: tuple[str, ...]) -> tuple[Path | None, dict[Path, list[Path]]]:
    """(the project's repository, or None when it is not one and plugins give another; each
    repository -> the plugin files in it). A plugin outside any git repository is a UsageError."""
    try:
        project = project_root()
    except UsageError:
        if not plugins:
            raise
        project = None  # an installed harness: REV names a revision of the plugins' repository
    repos: dict[Path, list[Path]] = {project: []} if project else {}
    for plugin in plugins:
        path = Path(plugin).resolve()
        try:
            repos.setdefault(repo_root(path), []).append(path)
        except UsageError:
            raise UsageError(f"--baseline: the plugin {plugin} is not in a git repository, so it has no revision "
                             f"to compare with; commit it in one, or verify it without --baseline") from None
    return project, repos


def _resolves(rev: str, repo: Path) -> bool:
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                          capture_output=True).returncode == 0


@contextlib.contextmanager
def baseline(rev: str, head: list, plugins: tuple[str, ...] = ()) -> Iterator[dict]:
    """The base of ``rev`` checked out and loaded (here and, through SOURCES_ENV and AUTOLOAD,
    in every kernel process), for the block; yields :func:`pair`'s answer plus ``rev``,
    ``commit`` and ``repositories`` ({path, commit} of each repository checked out). REV is a
    revision of the project and of each plugin file's repository; where the project does not
    have it but a plugin's repository does, the project's kernels are compared with nothing."""
    from harness.registry.registry import Origin
    project, repos = _repositories(plugins)
    if project is not None and plugins and any(r != project for r in repos) and not _resolves(rev, project):
        del repos[project]  # a revision of the user's repository, not of the harness's
    with contextlib.ExitStack() as stack:
        sources, checked_out = [], []
        for k, (repo, files) in enumerate(repos.items()):
            tree, commit = stack.enter_context(checkout(rev, repo))
            in_tree = [tree / f.relative_to(repo) for f in files]
            package = PROJECT_PACKAGE if repo == project else f"_baseline_{k}"
            sources.append(source(tree, [f for f in in_tree if f.is_file()], package=package))
            checked_out.append({"path": str(repo), "commit": commit})
        compared = [e for e in head if project in repos or e.origin is not Origin.PROJECT]
        previous = os.environ.get(SOURCES_ENV)
        os.environ[SOURCES_ENV] = sources_to_env(sources)
        try:
            base = load_base(sources)
            yield dict(pair(compared, base), rev=rev, commit=checked_out[0]["commit"], repositories=checked_out)
        finally:
            if previous is None:
                os.environ.pop(SOURCES_ENV, None)
            else:
                os.environ[SOURCES_ENV] = previous
