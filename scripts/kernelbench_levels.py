"""KernelBench benchmark: the identity candidate of every problem in a folder, verified.

    .venv/bin/python scripts/kernelbench_levels.py --dir third_party/KernelBench/level1 \\
        [--only PATTERN] [--every N] [--max-examples 3] [--jobs 1] [--timeout 600] [--out docs/kernelbench_level1.md]

Any level: ``--dir`` names its folder (level1, level2, ...); ``--every 3`` takes every third problem
in number order (a sample on a shared machine). ``scripts/kernelbench_level1.py`` is this script.

For each ``*.py`` problem (``Model``, ``get_inputs``, ``get_init_inputs``) it writes a candidate
whose ``ModelNew`` is the problem's own ``Model`` (a correct verifier must PASS every one), runs
``python -m harness verify --reference PROBLEM --candidate CANDIDATE`` in a fresh process, and
reads its verify.json: the verdict, the cases outside the reference's domain, the scaling of the
problem's sizes, the time to the verdict. It prints and writes a markdown table (``--out``), and
downloads nothing: the problems are read from ``--dir``.

Outcomes: PASS; FAIL (a false alarm: the identity candidate is correct); REFUSED (the harness
declined the problem with a one-line reason, exit 2); TIMEOUT; ERROR (anything else).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTSIDE = "outside the reference's domain"  # harness.reference.domain.OUTSIDE, read from the records

IDENTITY = '''"""The identity candidate of {name}: ModelNew is the problem's own Model."""
import importlib.util as _util

_spec = _util.spec_from_file_location("kernelbench_identity_problem", {path!r})
_problem = _util.module_from_spec(_spec)
_spec.loader.exec_module(_problem)
ModelNew = _problem.Model
'''

# wrong: Model's output with its last element moved by 1e-3 of the output's largest magnitude
# (KernelBench's own check, allclose at 1e-2, passes it), an index output's last index moved by one;
# a verifier must FAIL every one
PERTURBED = IDENTITY + """

import torch as _torch


class ModelNew(_problem.Model):
    def forward(self, *args):
        out = super().forward(*args)
        if not (isinstance(out, _torch.Tensor) and out.numel()):
            return out
        out = out.clone()
        if not out.is_floating_point():  # indices (argmax): the last one names its neighbour
            out.view(-1)[-1] += 1 if int(out.view(-1)[-1]) == 0 else -1
            return out
        out.view(-1)[-1] += 1e-3 * (out.abs().max() + 1e-3)
        return out
"""
CANDIDATES = {"identity": IDENTITY, "perturbed": PERTURBED}


def identity_candidate(problem: Path, where: Path, kind: str = "identity") -> Path:
    """A candidate file whose ModelNew is ``problem``'s Model (imported from its path), or with
    ``kind="perturbed"`` a wrong one (PERTURBED)."""
    stem = re.sub(r"\W", "_", problem.stem)
    out = where / f"{kind}_{stem}.py"
    out.write_text(CANDIDATES[kind].format(name=problem.name, path=str(problem.resolve())))
    return out


def problem_order(path: Path) -> tuple:
    m = re.match(r"(\d+)_", path.name)
    return (int(m.group(1)) if m else 10 ** 9, path.name)


def run_one(problem: Path, args) -> dict:
    with tempfile.TemporaryDirectory(prefix="kb_") as tmp:
        tmp = Path(tmp)
        candidate = identity_candidate(problem, tmp, args.candidate)
        report = tmp / "report"
        cmd = [sys.executable, "-m", "harness", "verify", "--reference", str(problem), "--candidate", str(candidate),
               "--max-examples", str(args.max_examples), "--report-dir", str(report), "--no-render",
               *(["-x"] if args.candidate == "perturbed" else [])]
        start = time.monotonic()
        try:
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=args.timeout,
                                  env=dict(os.environ, PYTHONPATH=str(ROOT)))
        except subprocess.TimeoutExpired:
            return {"problem": problem.name, "outcome": "TIMEOUT", "seconds": args.timeout,
                    "why": f"no verdict in {args.timeout:.0f} s"}
        seconds = time.monotonic() - start
        record = _verify_json(report)
        text = (proc.stdout + proc.stderr).strip()
        return {"problem": problem.name, "seconds": seconds, "rc": proc.returncode,
                **classify(proc.returncode, record, text)}


def _verify_json(report: Path) -> dict | None:
    path = report / "verify.json"
    if not path.is_file():
        found = sorted(report.rglob("verify.json"))
        path = found[0] if found else path
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _last_line(text: str) -> str:
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    return lines[-1] if lines else ""


def classify(rc: int, record: dict | None, text: str) -> dict:
    """The outcome of one verify run from its exit code and verify.json."""
    out: dict = {"scaling": "", "outside": 0, "cases": None, "why": ""}
    if record is not None:
        kb = record.get("kernelbench") or {}
        out["scaling"] = kb.get("scaling_text", "")
        cases = record.get("cases") or []
        out["outside"] = len({r.get("case_id") for r in cases if OUTSIDE in (r.get("message") or "")})
        out["cases"] = len({r.get("case_id") for r in cases})
    if rc == 0:
        out["outcome"] = "PASS"
    elif rc == 2:
        out["outcome"], out["why"] = "REFUSED", _last_line(text)
    elif rc == 1:
        out["outcome"], out["why"] = "FAIL", _failed_checks(record) or _failure(text)
    else:
        out["outcome"], out["why"] = "ERROR", f"exit {rc}: {_last_line(text)}"
    return out


def _failed_checks(record: dict | None) -> str:
    """The failed checks of verify.json, each with its number of failing cases, and the worst error
    as a multiple of the allowed: "forward (3), no_grad (1), worst 2.28 x the allowed". Read from
    the records, not the console, whose table wraps a long cell onto lines of its own."""
    failed: dict[str, set] = {}
    worst = None
    for r in (record or {}).get("cases") or []:
        if r.get("passed", True):
            continue
        failed.setdefault(str(r.get("check")), set()).add(r.get("case_id"))
        ratio = r.get("err_ratio")
        if isinstance(ratio, (int, float)):
            worst = ratio if worst is None else max(worst, ratio)
    if not failed:
        return ""
    text = ", ".join(f"{check} ({len(ids)})" for check, ids in failed.items())
    return text + (f", worst {worst:.3g} x the allowed" if worst is not None else "")


def _failure(text: str) -> str:
    for line in text.splitlines():
        if re.search(r"\bFAIL\b|mismatch|exceeds|crash", line):
            return line.strip()[:200]
    return _last_line(text)[:200]


def table(rows: list[dict], args, started: str) -> str:
    counts = {k: sum(r["outcome"] == k for r in rows) for k in ("PASS", "FAIL", "REFUSED", "TIMEOUT", "ERROR")}
    times = [r["seconds"] for r in rows]
    lines = [
        f"{args.candidate.capitalize()} candidates of {len(rows)} problems from `{args.dir}`"
        + (f" (`--only {args.only}`)" if args.only else "")
        + (f" (every {args.every}th problem)" if args.every > 1 else "")
        + f", `--max-examples {args.max_examples}`, CPU interpreter, measured {started}.",
        "",
        "**" + ", ".join(f"{k} {v}" for k, v in counts.items()) + "**"
        + (f"; time to verdict median {statistics.median(times):.0f} s, max {max(times):.0f} s" if times else "")
        + f"; {sum(r.get('outside') or 0 for r in rows)} cases outside the reference's domain (not run, never the "
          f"candidate's failure) in {sum(bool(r.get('outside')) for r in rows)} problems",
        "",
        "| problem | outcome | time (s) | cases | outside domain | sizes | why |",
        "| --- | --- | ---: | ---: | ---: | --- | --- |",
    ]
    for r in rows:
        why = r.get("why", "").replace("|", "\\|")
        scaling = (r.get("scaling") or "").replace("|", "\\|")
        lines.append(f"| {r['problem']} | {r['outcome']} | {r['seconds']:.0f} | {r.get('cases') or ''} | "
                     f"{r.get('outside', 0)} | {scaling} | {why} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir", required=True, help="a folder of KernelBench problem files (e.g. KernelBench/level1)")
    p.add_argument("--only", default=None, help="a glob on the file names, or a comma-separated list of globs (run in "
                   "that order)")
    p.add_argument("--every", type=int, default=1, help="every N-th problem only, in number order (a sample)")
    p.add_argument("--max-examples", type=int, default=3)
    p.add_argument("--candidate", choices=tuple(CANDIDATES), default="identity",
                   help="identity (ModelNew is Model: must PASS) or perturbed (one output element off by 1e-3 of the "
                        "largest: must FAIL; run with -x)")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per problem")
    p.add_argument("--out", default=None, help="write the markdown table here")
    p.add_argument("--json", default=None, help="write the rows as JSON here")
    args = p.parse_args(argv)
    if args.every < 1:
        print(f"--every {args.every}: give a whole number >= 1", file=sys.stderr)
        return 2
    folder = Path(args.dir)
    if not folder.is_dir():
        print(f"--dir {args.dir}: not a folder", file=sys.stderr)
        return 2
    problems = sorted((f for f in folder.glob("*.py") if not f.name.startswith("__")), key=problem_order)
    if args.only:
        globs = [g.strip() for g in args.only.split(",") if g.strip()]
        def first_match(f: Path) -> int:  # the order of the globs: a sample first, say
            return next((i for i, g in enumerate(globs) if fnmatch.fnmatch(f.name, g if "*" in g else f"*{g}*")), -1)

        problems = sorted((f for f in problems if first_match(f) >= 0), key=first_match)
    problems = problems[::args.every]
    if not problems:
        print(f"--dir {args.dir}: no problem files" + (f" match --only {args.only}" if args.only else ""), file=sys.stderr)
        return 2
    started = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    rows: list[dict] = []

    def one(problem: Path) -> dict:
        row = run_one(problem, args)
        print(f"{row['outcome']:8} {row['seconds']:6.0f} s  {problem.name}  {row.get('scaling', '')}  {row.get('why', '')}",
              flush=True)
        rows.append(row)
        if args.json:  # what finished so far, in case the run is stopped
            Path(args.json).write_text(json.dumps(rows, indent=1))
        return row

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(one, problems))
    rows.sort(key=lambda r: problem_order(Path(r["problem"])))
    text = table(rows, args, started)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
