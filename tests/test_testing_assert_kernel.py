"""harness.testing.assert_kernel from a user's own test file, in a directory of its own."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

USER_TESTS = '''
import sys
sys.path.insert(0, {plugins!r})
import _tutorial_impl
import torch
from harness import Contract
from harness.testing import assert_kernel

# what the tutorial kernel promises (examples/plugins/tutorial_rmsnorm.py): other cases must be refused
CONTRACT = Contract(dtypes=(torch.float32, torch.float16), max_n=4096, contiguous=True)

my_rmsnorm = _tutorial_impl.make()
block_divisor = _tutorial_impl.make(div_by_block=True)
dgamma_mean = _tutorial_impl.make(dgamma_mean=True)


def test_correct():
    assert_kernel("rmsnorm", my_rmsnorm, max_examples=2, contract=CONTRACT)


def test_block_divisor():
    assert_kernel("rmsnorm", block_divisor, max_examples=2, contract=CONTRACT)


def test_dgamma_mean():
    assert_kernel("rmsnorm", dgamma_mean, max_examples=2, contract=CONTRACT)
'''


@pytest.mark.slow
def test_assert_kernel_fails_the_classic_bugs_with_readable_reasons(tmp_path):
    (tmp_path / "test_user_kernels.py").write_text(USER_TESTS.format(plugins=str(ROOT / "examples" / "plugins")))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # the plugin chooses it
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", "test_user_kernels.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    out = proc.stdout
    assert proc.returncode == 1, out[-4000:] + proc.stderr[-2000:]
    assert re.search(r"2 failed, 1 passed", out), out[-2000:]
    # each failure names its checks, the worst case's id, the mismatch lines and a repro command
    block = out[out.index("_ test_block_divisor _"):]
    # the divisor is the block, not N: every N that is not the block itself fails the forward
    assert re.search(r"checks (forward|dx|dgamma) \(\d+\), (forward|dx|dgamma) \(\d+\), (forward|dx|dgamma) \(\d+\)", block)
    assert re.search(r"FAIL rmsnorm \w+ rmsnorm:M=\d+,N=\d+,dtype=float(32|16),layout=\w+,values=\w+,", block)
    assert "Mismatched elements:" in block and "Greatest absolute difference:" in block
    assert "repro: HARNESS_CASE=rmsnorm:" in block and "test_user_kernels.py::test_block_divisor" in block
    # the dgamma failure's own section ends at the next section header (another failure, the summary)
    dgamma = out[out.index("_ test_dgamma_mean _"):]
    dgamma = re.split(r"\n_{3,} test_block_divisor _{3,}\n|\n=+ (?:short test summary|warnings summary)", dgamma)[0]
    assert re.search(r"FAIL rmsnorm dgamma rmsnorm:M=\d+", dgamma)
    assert "checks dgamma (all);" in dgamma  # only dgamma is wrong: the others must pass


def test_assert_kernel_without_the_interpreter_says_how(tmp_path):
    script = ("import triton\nfrom harness.testing import assert_kernel\n"
              "try:\n    assert_kernel('rmsnorm', lambda x, g, e: x, backend='interpreter')\n"
              "except Exception as exc:\n    print(type(exc).__name__, exc)\n")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert "UsageError" in proc.stdout and "TRITON_INTERPRET=1" in proc.stdout, proc.stdout + proc.stderr


def test_assert_kernel_refuses_an_unknown_waiver():
    from harness import Contract, RegistryError
    from harness.testing import assert_kernel

    with pytest.raises(RegistryError, match="known checks: forward, dx, dgamma"):
        assert_kernel("rmsnorm", lambda x, g, e: x, contract=Contract(waive={"forwards": "typo"}))


WRONG_KERNEL_TEST = '''
import sys
sys.path.insert(0, {plugins!r})
import _tutorial_impl
import torch
from harness import Contract
from harness.testing import assert_kernel

CONTRACT = Contract(dtypes=(torch.float32, torch.float16), max_n=4096, contiguous=True)
block_divisor = _tutorial_impl.make(div_by_block=True)
correct = _tutorial_impl.make()


def test_block_divisor():
    assert_kernel("rmsnorm", block_divisor, contract=CONTRACT, quick=True)


def test_correct():
    assert_kernel("rmsnorm", correct, contract=CONTRACT, quick=True)
'''


def _failure_section(out: str, test: str) -> list[str]:
    """The lines pytest prints for one failed test, from its header to the next section."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"_+ {test} _+$", line))
    end = next(i for i in range(start + 1, len(lines)) if re.match(r"(_{3,} \w+ _{3,}|=+ .* =+)$", lines[i]))
    return lines[start:end]


def test_quick_assert_kernel_failure_is_short_and_its_repro_runs_as_printed(tmp_path):
    """A wrong kernel's pytest failure fits a screen (what failed, the grouping, the worst element,
    a repro), shows no harness source, needs no TRITON_INTERPRET by hand, and its repro line,
    pasted into a shell elsewhere, re-runs that one case and fails the same way; the correct
    kernel passes the same quick suite."""
    import shlex
    import time

    tests = tmp_path / "user"
    tests.mkdir()
    (tests / "test_kernel.py").write_text(WRONG_KERNEL_TEST.format(plugins=str(ROOT / "examples" / "plugins")))
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "HARNESS_QUICK", "HARNESS_CASE")}
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_kernel.py"],
                          cwd=tests, env=env, capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - started
    out = proc.stdout
    assert proc.returncode == 1 and "1 failed, 1 passed" in out, out[-3000:] + proc.stderr[-2000:]
    section = _failure_section(out, "test_block_divisor")
    print(f"quick assert_kernel, two tests (a wrong and a correct kernel), pytest wall time {wall:.1f} s; "
          f"failure text {len(section)} lines")
    assert len(section) < 25, "\n".join(section)
    text = "\n".join(section)
    assert "def assert_kernel" not in text and "run_suite(" not in text  # harness frames hidden
    assert "dtype float16" in text or "dtype float32" in text  # the grouping line
    assert "Worst element at index" in text
    repro = next(line.split("repro: ", 1)[1] for line in section if "repro: " in line)
    case_id = re.search(r"HARNESS_CASE=(\S+)", repro).group(1)
    assert case_id in text.split("worst: ", 1)[1].splitlines()[0]  # the repro re-runs the worst case
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    again = subprocess.run(repro, shell=True, cwd=elsewhere, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 1, again.stdout[-3000:] + again.stderr[-2000:]
    assert "on 1 of 1 case(s)" in again.stdout and shlex.split(repro)[-1].endswith("test_kernel.py::test_block_divisor")


def test_quick_cover_keeps_the_smallest_case_of_each_dtype_and_layout():
    from harness.registry.registry import REGISTRY
    from harness.run.suite import _elements, quick_cover

    floor = REGISTRY.op("rmsnorm").floor_cases(backend="interpreter")
    quick = [c for c in floor if c.id in quick_cover(floor)]
    pairs = {(dict(c.params)["dtype"], dict(c.params)["layout"]) for c in floor}
    assert len(quick) == len(pairs) < len(floor)
    for case in quick:
        params = dict(case.params)
        same = [c for c in floor if (dict(c.params)["dtype"], dict(c.params)["layout"]) == (params["dtype"], params["layout"])]
        assert _elements(case) == min(_elements(c) for c in same)


REGISTERED = '''
from harness import register_kernel


@register_kernel("swiglu", name="{name}")
def wrong_swiglu(a, b):  # sigmoid of the wrong operand
    import torch
    af, bf = a.float(), b.float()
    return (af * torch.sigmoid(bf) * bf).to(a.dtype)
'''


def test_a_kernel_registered_by_a_file_gets_verifys_repro_line(tmp_path):
    import importlib.util
    import shlex

    from harness.cases.command import console_words
    from harness.registry.registry import REGISTRY
    from harness.testing import assert_kernel

    name = f"assert_kernel_registered_{os.getpid()}"
    before = dict(REGISTRY.entries)
    path = tmp_path / "my_plugin.py"
    path.write_text(REGISTERED.format(name=name))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        with pytest.raises(AssertionError) as info:
            assert_kernel("swiglu", module.wrong_swiglu, quick=True)
    finally:  # other tests in this process see the registry as it was
        REGISTRY.entries.clear()
        REGISTRY.entries.update(before)
    text = str(info.value)
    assert len(text.splitlines()) < 25
    repro = shlex.split(text.split("repro: ", 1)[1].splitlines()[0])
    assert repro[:2] == [*console_words(), "verify"] and repro[repro.index("--plugin") + 1] == str(path)
    assert repro[repro.index("--select") + 1] == name and repro[repro.index("--case") + 1].startswith("swiglu:")
