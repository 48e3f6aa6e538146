"""How long the first answer takes on this machine: a one-case repro and a new plugin kernel's
full verdict, each cold (a plugin file never run before, a fresh report folder) and warm (the same
command again at once, its saved verdict not reused), as a user runs them: the console script, in
a fresh process, from another directory.

    .venv/bin/python scripts/bench_first_verdict.py [--out FILE.json]

Prints one line per run (wall seconds, and the CPU seconds of every process the command ran,
which a machine shared with other work does not inflate) and writes them as JSON. A benchmark,
not a test: the targets (10 s for the repro, 60 s for the verdict, on the 2-core CPU) are read
against it in docs/results.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / ".venv" / "bin" / "triton-verify"
EXAMPLE = ROOT / "examples" / "plugins" / "quickstart_rmsnorm.py"
CASE = "rmsnorm:M=7,N=257,dtype=float32,layout=contiguous,values=tiny,eps=1e-12,seed=920277"


def timed(words: list[str], cwd: Path) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    proc = subprocess.run(words, cwd=cwd, capture_output=True, text=True)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"exit": proc.returncode, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "tail": proc.stdout.strip().splitlines()[-1:] + proc.stderr.strip().splitlines()[-1:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help="write the runs as JSON here")
    args = parser.parse_args()
    if not SCRIPT.is_file():
        print(f"bench_first_verdict: {SCRIPT} not found; run make setup first", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="first_verdict_"))
    try:
        plugin = work / f"new_kernel_{os.getpid()}.py"  # never imported before: no bytecode cache
        plugin.write_text(EXAMPLE.read_text())
        elsewhere = work / "elsewhere"
        elsewhere.mkdir()
        runs = []
        for name, extra in (("one-case repro", ["--select", "my_rmsnorm_bug", "--case", CASE]),
                            ("full verdict of a new plugin kernel", ["--select", "my_rmsnorm"])):
            for temperature in ("cold", "warm"):
                out = work / f"report_{len(runs)}"
                words = [str(SCRIPT), "verify", "--backend", "interpreter", "--plugin", str(plugin), *extra,
                         "--no-cache", "--report-dir", str(out)]
                run = {"what": name, "run": temperature, "cores": os.cpu_count(),
                       "load_1min": round(os.getloadavg()[0], 1), **timed(words, elsewhere)}
                runs.append(run)
                print(f"{name}, {temperature}: {run['wall_s']} s wall, {run['cpu_s']} s CPU "
                      f"(exit {run['exit']}, load {run['load_1min']} on {run['cores']} cores)", flush=True)
        if args.out:
            Path(args.out).write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "runs": runs}, indent=1))
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
