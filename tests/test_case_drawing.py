"""harness.cases.drawing: the cases of an op are a function of the op, the backend and the seed,
never of the process that draws them.

Bug classes: a case id that changes with the string hash seed (a set's order deciding which
dimension a case keeps, which floor case comes first); generated shapes that change with the
modules imported before the draw (hypothesis's pool of constants read from local modules), so
that a repro command or an incremental gate's reused verdict names a case another worker never
draws."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

DRAW = """
import json, sys
if sys.argv[1] == "crowded":
    sys.path.insert(0, sys.argv[2])
    import many_constants  # a local module full of sizes, imported before anything is drawn
from harness.registry.registry import REGISTRY, load_builtin_ops
from harness.cases.drawing import drawn_cases
load_builtin_ops()
out = {}
for name in sorted(REGISTRY.ops):
    spec = REGISTRY.op(name)
    out[name] = [c.id for c in spec.floor_cases(backend="interpreter")]
    out[name] += [c.id for c in drawn_cases(spec, backend="interpreter", seed=6188, max_examples=25)]
print(json.dumps(out))
"""


def draw(tmp_path: Path, mode: str, hash_seed: int) -> dict:
    env = {**os.environ, "PYTHONHASHSEED": str(hash_seed)}
    proc = subprocess.run([sys.executable, "-c", DRAW, mode, str(tmp_path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_the_same_cases_in_any_process(tmp_path):
    sizes = ", ".join(str(n) for n in (2638, 4096, 12, 8, 17, 255, 257, 2049, 31, 33, 513, 1023, 1025, 7, 3))
    (tmp_path / "many_constants.py").write_text(f"SIZES = [{sizes}]\nSCALES = [3.5, 1e-7, 65504.0, 0.125]\n")
    plain = draw(tmp_path, "plain", hash_seed=1)
    crowded = draw(tmp_path, "crowded", hash_seed=5)
    assert len(plain) >= 10 and all(len(ids) > 25 for ids in plain.values())
    differing = {op: sum(a != b for a, b in zip(plain[op], crowded[op])) for op in plain if plain[op] != crowded[op]}
    assert not differing, f"case ids differ between processes (op: how many): {differing}"
