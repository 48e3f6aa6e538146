"""Compare the reports of two runs field by field: the same verdicts, cases and mutant outcomes?

    .venv/bin/python scripts/compare_reports.py DIR_A DIR_B [--all-fields]

Each DIR holds verify.json and/or mutation.json, at its top or in sub-directories (a gate's
report tree; ``incremental/`` is skipped); files are paired by their path under DIR. Compared,
whatever order the records come in: every kernel's verdict (and the report's ``passed``), every
case id's status per check (passed, failed, waived, inconclusive), every mutant's status (and the
score). ``--all-fields`` also compares every other field of each kernel summary, case record and
mutant, timing fields aside, and ``--ignore FIELD`` (repeatable, at any depth: ``repro`` holds the
checkout's path) more. Prints each difference on a line; exit 0 when none, 1 on any, 2 when
a directory holds no report or a report is unreadable.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reports import jsonio  # noqa: E402
from vocabulary.records import case_status  # noqa: E402

REPORTS = ("verify.json", "mutation.json")
SKIPPED_DIRS = ("incremental",)
# fields that measure time (or where a mutant ran), never what was decided: ignored by --all-fields
TIMING = frozenset({"seconds", "timing", "time_breakdown", "worker_seconds", "gpu", "reused_from"})


class Unreadable(Exception):
    """A directory without reports, or a report that is not JSON."""


def find_reports(root: Path) -> dict[str, Path]:
    """verify.json / mutation.json under ``root``, keyed by their path relative to it."""
    if not root.is_dir():
        raise Unreadable(f"{root}: not a directory; give the --report-dir of a run")
    found = {str(p.relative_to(root)): p for name in REPORTS for p in root.rglob(name)
             if not set(p.relative_to(root).parts[:-1]) & set(SKIPPED_DIRS)}
    if not found:
        raise Unreadable(f"{root}: holds no verify.json or mutation.json")
    return found


def load(path: Path) -> dict:
    try:
        return jsonio.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise Unreadable(f"{path}: unreadable ({exc})") from None


def _same(a, b, ignored: frozenset = frozenset()) -> bool:
    """Equal, NaN equal to NaN (a report's "nan" reads back as a float NaN), ``ignored`` fields of
    nested dicts aside."""
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        keys = a.keys() - ignored
        return keys == b.keys() - ignored and all(_same(a[k], b[k], ignored) for k in keys)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y, ignored) for x, y in zip(a, b))
    return a == b


def _keyed(items: list[dict], key) -> dict:
    """Items by key; several items under one key (a check recorded twice for a case) kept as a
    list in a stable order, so that only their contents, not the order they were written in, count."""
    out: dict = defaultdict(list)
    for item in items:
        out[key(item)].append(item)
    return {k: sorted(v, key=_untimed) for k, v in out.items()}


def _untimed(item: dict) -> str:
    return jsonio.dumps({k: v for k, v in item.items() if k not in TIMING}, indent=None)


def _diff_sets(what: str, a: dict, b: dict, show) -> list[str]:
    lines = [f"{what} {show(k)}: only in A" for k in sorted(a.keys() - b.keys(), key=str)]
    lines += [f"{what} {show(k)}: only in B" for k in sorted(b.keys() - a.keys(), key=str)]
    return lines


def _diff_fields(what: str, a: list[dict], b: list[dict], ignored: frozenset) -> list[str]:
    if len(a) != len(b):
        return [f"{what}: {len(a)} record(s) in A, {len(b)} in B"]
    lines = []
    for x, y in zip(a, b):
        for field in sorted((x.keys() | y.keys()) - TIMING - ignored):
            if not _same(x.get(field), y.get(field), ignored):
                lines.append(f"{what} {field}: {x.get(field)!r} -> {y.get(field)!r}")
    return lines


def _diff_items(what: str, a: list[dict], b: list[dict], *, key, show, status, ignored) -> list[str]:
    """The items of one kind only one side has, those whose ``status`` (a list of strings for the
    items under one key) differs, and unless ``ignored`` is None (the fields not compared)
    every other field that differs."""
    ka, kb = _keyed(a, key), _keyed(b, key)
    lines = _diff_sets(what, ka, kb, show)
    for k in sorted(ka.keys() & kb.keys()):
        where = f"{what} {show(k)}"
        sa, sb = status(ka[k]), status(kb[k])
        if sa != sb:
            lines.append(f"{where}: {', '.join(sa)} -> {', '.join(sb)}")
        if ignored is not None:
            lines += _diff_fields(where, ka[k], kb[k], ignored)
    return lines


def _field(name: str):
    return lambda items: [str(i.get(name)) for i in items]


def compare_verify(a: dict, b: dict, *, ignored: frozenset | None) -> list[str]:
    lines = [] if a.get("passed") == b.get("passed") else [f"passed: {a.get('passed')} -> {b.get('passed')}"]
    lines += _diff_items("kernel", a.get("kernels", []), b.get("kernels", []), key=lambda k: (k["op"], k["name"]),
                         show="/".join, status=_field("verdict"), ignored=ignored)
    return lines + _diff_items(
        "case", a.get("cases", []), b.get("cases", []), key=lambda r: (r["op"], r["kernel"], r["case_id"], r["check"]),
        show=lambda k: f"{k[0]}/{k[1]} {k[2]} [{k[3]}]", status=lambda rs: sorted(case_status(r).value for r in rs),
        ignored=ignored)


def compare_mutation(a: dict, b: dict, *, ignored: frozenset | None) -> list[str]:
    lines = [f"{field}: {a.get(field)!r} -> {b.get(field)!r}" for field in ("passed", "score")
             if not _same(a.get(field), b.get(field))]
    return lines + _diff_items("mutant", a.get("mutants", []), b.get("mutants", []), key=lambda m: (m["op"], m["name"]),
                               show="/".join, status=_field("status"), ignored=ignored)


def compare_dirs(dir_a: Path, dir_b: Path, *, all_fields: bool = False, ignore: tuple[str, ...] = ()) -> list[str]:
    """Every difference between the reports of two runs, one line each (empty: the same)."""
    fields = frozenset(ignore) if all_fields else None
    found_a, found_b = find_reports(dir_a), find_reports(dir_b)
    lines = [f"{rel}: only in A" for rel in sorted(found_a.keys() - found_b.keys())]
    lines += [f"{rel}: only in B" for rel in sorted(found_b.keys() - found_a.keys())]
    for rel in sorted(found_a.keys() & found_b.keys()):
        compare = compare_verify if Path(rel).name == "verify.json" else compare_mutation
        lines += [f"{rel}: {line}" for line in compare(load(found_a[rel]), load(found_b[rel]), ignored=fields)]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir_a", type=Path, metavar="DIR_A")
    parser.add_argument("dir_b", type=Path, metavar="DIR_B")
    parser.add_argument("--all-fields", action="store_true",
                        help="also compare every other field of kernels, cases and mutants (timing aside)")
    parser.add_argument("--ignore", action="append", default=[], metavar="FIELD",
                        help="with --all-fields: a field not to compare, at any depth (repeatable)")
    args = parser.parse_args(argv)
    try:
        lines = compare_dirs(args.dir_a, args.dir_b, all_fields=args.all_fields, ignore=tuple(args.ignore))
    except Unreadable as exc:
        print(f"compare_reports: {exc}", file=sys.stderr)
        return 2
    for line in lines:
        print(line)
    print(f"compare_reports: {len(lines)} difference(s)" if lines else "compare_reports: the same", file=sys.stderr)
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
