"""``python -m harness report``: index.html, junit.xml and summary.md from the JSON reports.

Reads ``DIR/verify.json`` and ``DIR/mutation.json`` (whichever exist), plus train_check.json,
exercise.json and bench_*.json when present. Reports read records only: nothing here imports
a kernel, an oracle, torch or triton, so it runs anywhere the JSON files are.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli import common
from harness.errors import UsageError
from vocabulary.records import kernel_summaries
from reports import jsonio

NAME = "report"
HELP = "render index.html, junit.xml and summary.md from verify.json / mutation.json"
EXAMPLE = "python -m harness report --report-dir reports/out"
EXTRAS = {"train_check.json": "train-check", "exercise.json": "exercise"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--report-dir", default=common.DEFAULT_REPORT_DIR, metavar="DIR",
                   help=f"where verify.json / mutation.json are and the reports go (default: {common.DEFAULT_REPORT_DIR})")
    p.add_argument("--merge", nargs="+", default=None, metavar="DIR",
                   help="join the report directories of a run split with --shard I/K (every part once) into "
                        "--report-dir, then render; exit 1 if the merged verdict fails")


def _read(path: Path) -> dict | None:
    if not path.is_file():
        return None
    try:
        data = jsonio.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path} cannot be read as JSON ({exc}); re-run the command that writes it") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path} holds a {type(data).__name__}, not a report object; re-run the command that writes it")
    return data


def load(directory: str | Path) -> tuple[dict | None, dict | None, dict[str, dict]]:
    """(verify, mutation, extras) from DIR; UsageError when neither verify.json nor mutation.json exists."""
    folder = Path(directory)
    verify, mutation = _read(folder / "verify.json"), _read(folder / "mutation.json")
    if verify is None and mutation is None:
        raise UsageError(f"no verify.json or mutation.json in {folder}; run `python -m harness verify "
                         f"--report-dir {folder}` (or mutate) first")
    try:
        kernel_summaries(verify or {})  # the one reading of the kernels through their schema: a clear word, early
    except ValueError as exc:
        raise UsageError(f"{folder / 'verify.json'}: {exc}") from None
    extras = {label: data for name, label in EXTRAS.items() if (data := _read(folder / name)) is not None}
    for path in sorted(folder.glob("bench_*.json")):
        data = _read(path)
        if data is not None:
            extras[f"bench {path.stem.removeprefix('bench_')}"] = data
    return verify, mutation, extras


def write_all(directory: str | Path) -> list[Path]:
    """Render the three reports from the JSON in DIR, then write them together (each file whole
    or absent, the set with Ctrl-C held); each lists the sources it was rendered from."""
    from harness.cli import outdir
    from reports import html, junit, manifest, summary_md, writer

    verify, mutation, extras = load(directory)
    _mark_stale(directory, verify, mutation, extras)
    listed = manifest.read(directory)["files"]
    sources = {name: listed.get(name, {}).get("run", "not written by the harness")
               for name in sorted(p.name for p in Path(directory).iterdir() if manifest.is_source(p.name))}
    texts = {  # every renderer runs before any file is written: a failure leaves none half-replaced
        "index.html": html.render(verify, mutation, extras, directory=directory),
        "junit.xml": junit.render(verify, mutation),
        "summary.md": summary_md.render(verify, mutation, extras),
    }
    with outdir.signals_held():
        return [writer.write_text(directory, name, text, sources=sources) for name, text in texts.items()]


def _mark_stale(directory, verify: dict | None, mutation: dict | None, extras: dict[str, dict]) -> None:
    """Put the manifest's word on each source written by an earlier run into its dict (``stale``),
    for the renderers to show beside its verdict."""
    from reports import manifest

    by_name = {"verify.json": verify, "mutation.json": mutation,
               **{name: extras.get(label) for name, label in EXTRAS.items()},
               **{f"bench_{label.removeprefix('bench ')}.json": data for label, data in extras.items() if label.startswith("bench ")}}
    for name, why in manifest.stale_sources(directory).items():
        if by_name.get(name) is not None:
            by_name[name]["stale"] = why


def write_fallback(directory: str | Path, error: BaseException) -> list[Path]:
    """After a rendering failure: a summary.md and junit.xml that say so and fail, so neither an
    earlier run's PASS nor nothing at all stands where CI looks; index.html stays absent."""
    from harness.cli import outdir
    from reports import fallback, manifest, writer

    try:
        verify, mutation, _ = load(directory)
    except UsageError:
        verify = mutation = None
    reason = f"{type(error).__name__}: {error}"
    with outdir.signals_held():
        manifest.invalidate_derived(directory)
        return [writer.write_text(directory, "summary.md", fallback.summary(verify, mutation, reason)),
                writer.write_text(directory, "junit.xml", fallback.junit(verify, mutation, reason))]


def write_after_run(directory: str | Path) -> bool:
    """For verify/mutate: render, and on any failure print one clear warning instead of a traceback.
    The caller's exit status stays the verdict of its checks; the warning says how to retry."""
    try:
        paths = write_all(directory)
    except Exception as exc:  # a broken renderer must not hide the verdict the JSON already holds
        try:
            write_fallback(directory, exc)
        except Exception as also:  # the stale reports were removed when the JSON was written
            print(f"warning: could not write the rendering-failed summary either: {type(also).__name__}: {also}",
                  file=sys.stderr)
        print(f"warning: verdict written, but rendering index.html/junit.xml/summary.md failed: "
              f"{type(exc).__name__}: {exc}; summary.md and junit.xml say so; retry with "
              f"`python -m harness report --report-dir {directory}`", file=sys.stderr)
        return False
    print(f"reports: {', '.join(str(p) for p in paths)}")
    return True


def merge(directories: list[str], into: str | Path) -> list[str]:
    """Merge the parts' verify.json / mutation.json into ``into``; return the verdicts' names that failed."""
    from reports import writer
    from reports.merge import MergeError, merge_mutation, merge_verify

    failed = []
    for name, merge_fn in (("verify.json", merge_verify), ("mutation.json", merge_mutation)):
        parts = [(d, data) for d in directories if (data := _read(Path(d) / name)) is not None]
        if not parts:
            continue
        if len(parts) != len(directories):
            lacking = [d for d in directories if not (Path(d) / name).is_file()]
            raise UsageError(f"--merge: {name} is in some directories but not in {', '.join(lacking)}")
        try:
            merged = merge_fn(parts)
        except MergeError as exc:
            raise UsageError(f"--merge: {exc}") from None
        print(f"merged {len(parts)} part(s) -> {writer.write_json(into, name, merged)}")
        if not merged.get("passed"):
            failed.append(name)
    if not any((Path(d) / n).is_file() for d in directories for n in ("verify.json", "mutation.json")):
        raise UsageError(f"--merge: no verify.json or mutation.json in {', '.join(directories)}")
    return failed


def run(args: argparse.Namespace) -> int:
    failed = merge(args.merge, args.report_dir) if args.merge else []
    load(args.report_dir)  # no JSON to render is a usage error, before anything is removed
    try:
        paths = write_all(args.report_dir)
    except UsageError:
        raise
    except Exception as exc:  # a renderer's bug: one line, and reports that say rendering failed
        write_fallback(args.report_dir, exc)
        print(f"error: rendering failed: {type(exc).__name__}: {exc}; summary.md and junit.xml in "
              f"{args.report_dir} say so", file=sys.stderr)
        return 1
    for path in paths:
        print(path)
    if failed:
        print(f"report: the merged {' and '.join(failed)} verdict is FAIL", file=sys.stderr)
    return 1 if failed else 0
