"""harness.workflows.exercise: the tutorial's BLOCK-divisor exercise. Bug class: a mean divided by the padded
block width instead of the row length, invisible when N is a power of two."""

import inspect
import json

import pytest

import kernels.rmsnorm
from harness.workflows import exercise
from harness.cli import main


@pytest.mark.parametrize("function", ["_rmsnorm_forward", "_rmsnorm_backward"])
def test_mutant_source_changes_exactly_one_mean(function):
    import ast

    original = ast.unparse(ast.parse(inspect.getsource(kernels.rmsnorm))).splitlines()
    mutated = exercise.mutant_source(inspect.getsource(kernels.rmsnorm), function).splitlines()
    changed = [(a, b) for a, b in zip(original, mutated) if a != b]
    assert len(original) == len(mutated) and len(changed) == 1
    before, after = changed[0]
    assert "tl.sum(" in before and "/ N" in before and after == before.replace("/ N", "/ BLOCK")


def test_mutant_source_refuses_a_kernel_without_the_site():
    with pytest.raises(RuntimeError, match="expected exactly one"):
        exercise.mutant_source(inspect.getsource(kernels.rmsnorm), "_sum_partials")


def test_exercise_shows_the_tutorial_figures(backend, device):
    report = exercise.run(backend=backend.name, device=device)
    assert report["passed"], [e for e in report["expectations"] if not e["passed"]]
    ones = report["row_of_ones"]["values"]
    assert ones["triton_rmsnorm"]["y"] == pytest.approx(0.9999995, abs=1e-6)
    assert ones["block_divisor_forward"]["y"] == pytest.approx(1.411458, abs=1e-5)
    assert ones["block_divisor_backward"]["dx"] == pytest.approx(0.4980471, abs=1e-5)
    verdict = {(v["kernel"], v["N"]): v for v in report["verdicts"]}
    assert verdict[("block_divisor_forward", 256)]["passed"]
    assert "forward" in verdict[("block_divisor_forward", 257)]["failed_checks"]
    assert verdict[("block_divisor_backward", 257)]["failed_checks"] == ["dx"]
    # the evidence is the harness's own records, one per check
    assert {r["check"] for r in report["cases"]} >= {"forward", "dx", "dgamma", "output_meta"}


def test_mutants_are_not_registered():
    from harness.registry.registry import REGISTRY

    exercise.build_mutant("block_divisor_forward")
    assert all(e.name not in exercise.MUTANTS for e in REGISTRY.entries.values())


def test_cli_prints_both_values_and_writes_json(tmp_path, capsys):
    assert main(["exercise", "--report-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "y = 0.9999995" in out and "y = 1.4114581" in out
    assert json.loads((tmp_path / "exercise.json").read_text())["passed"]
