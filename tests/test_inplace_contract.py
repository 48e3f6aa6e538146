"""Contract(inplace={output: buffer}): a kernel that writes a result into one of its input buffers
by design is judged on that buffer (it must hold the oracle's values after the call) and on every
other input staying unchanged; its wrong twins (wrong values in the buffer, another input touched)
fail, and an undeclared write still fails inputs_unchanged. The names are checked at registration."""

from __future__ import annotations

import pytest

from harness import register_kernel
from harness.errors import RegistryError
from harness.registry import inplace
from harness.registry.registry import REGISTRY, Contract, KernelEntry
from tests.fixtures import declared_io as io_kernels

RMSNORM = io_kernels.spread("rmsnorm", max_cases=6)
SOFTMAX = io_kernels.spread("softmax", max_cases=8)
DX_INTO_DY = Contract(inplace={"dx": "dy"})
Y_INTO_X = Contract(forward_only=True, inplace={"y": "x"})


def _failed(recs) -> set[str]:
    return {r.check for r in recs if not r.passed}


def test_a_backward_writing_dx_into_dy_passes_when_declared():
    recs = io_kernels.records("rmsnorm", io_kernels.rms_dx_into_dy, DX_INTO_DY, RMSNORM)
    assert not _failed(recs), [(r.check, r.case_id, r.message[:200]) for r in recs if not r.passed]
    buffer = [r for r in recs if r.check == "dx" and "written into dy" in r.message]
    assert len(buffer) == len(RMSNORM)  # the buffer itself was compared with the oracle, case by case
    assert {"repeatable", "no_grad", "fresh_inputs", "changed_input"} <= {r.check for r in recs}
    unchanged = [r for r in recs if r.check == "inputs_unchanged"]
    assert unchanged and all(r.passed and not r.waived for r in unchanged)
    assert any("written by design: upstream" in r.message for r in unchanged)


def test_wrong_values_left_in_the_declared_buffer_fail_its_output():
    recs = io_kernels.records("rmsnorm", io_kernels.rms_dx_into_dy_wrong_values, DX_INTO_DY, RMSNORM)
    wrong = [r for r in recs if r.check == "dx" and not r.passed]
    assert wrong and all("dx written into dy" in r.message for r in wrong)
    # the dx it returns is right: only the buffer is wrong
    assert all(r.passed for r in recs if r.check == "dx" and "written into" not in r.message)


def test_touching_another_input_fails_inputs_unchanged():
    recs = io_kernels.records("rmsnorm", io_kernels.rms_dx_into_dy_touches_x, DX_INTO_DY, RMSNORM[:3])
    failed = [r for r in recs if r.check == "inputs_unchanged" and not r.passed]
    assert failed and all("arg0" in r.message and "upstream:" not in r.message for r in failed)


def test_an_undeclared_write_into_dy_still_fails_inputs_unchanged():
    recs = io_kernels.records("rmsnorm", io_kernels.rms_dx_into_dy, Contract(), RMSNORM[:2])
    failed = [r for r in recs if r.check == "inputs_unchanged" and not r.passed]
    assert failed and all("upstream" in r.message for r in failed)


def test_an_inference_softmax_written_over_its_input_passes_and_its_wrong_twin_fails():
    good = io_kernels.records("softmax", io_kernels.softmax_into_x, Y_INTO_X, SOFTMAX)
    assert not _failed(good), [(r.check, r.case_id, r.message[:200]) for r in good if not r.passed]
    assert {"repeatable", "no_grad", "fresh_inputs"} <= {r.check for r in good}
    bad = io_kernels.records("softmax", io_kernels.softmax_into_x_wrong, Y_INTO_X, SOFTMAX[:3])
    wrong = [r for r in bad if r.check == "forward" and not r.passed]
    assert wrong and all("written into x" in r.message for r in wrong)
    undeclared = io_kernels.records("softmax", io_kernels.softmax_into_x, Contract(forward_only=True), SOFTMAX[:2])
    assert "inputs_unchanged" in _failed(undeclared)


@pytest.mark.parametrize("op,name,passes", [("rmsnorm", "plugin_rms_dx_into_dy", True),
                                            ("rmsnorm", "plugin_rms_dx_into_dy_wrong_values", False),
                                            ("softmax", "plugin_softmax_into_x", True)])
def test_the_buffer_is_read_back_from_a_kernel_process(op, name, passes):
    """verify runs the kernel in a process of its own: the buffer written there is judged here."""
    from harness.run.kernel_process import KernelProcess, ProcessHost
    from harness.run.runner import run_case
    from harness.settings import current

    plugin = "tests/fixtures/declared_io_plugin.py"
    contract = DX_INTO_DY if op == "rmsnorm" else Y_INTO_X  # as the plugin declares (not loaded here)
    entry = KernelEntry(op, name, lambda *a: None, contract, "kernel", "plugin", plugin, plugin=plugin)
    proc = KernelProcess(plugins=(plugin,), extra_modules=(), backend="interpreter", settings=current())
    try:
        proc.bind(op, name)
        recs = [r for c in (RMSNORM if op == "rmsnorm" else SOFTMAX)[:2]
                for r in run_case(REGISTRY.op(op), entry, c, backend="interpreter", device="cpu",
                                  host=ProcessHost(proc)).records]
    finally:
        proc.close()
    if passes:
        assert not _failed(recs), [(r.check, r.message[:200]) for r in recs if not r.passed]
        assert any("written into" in r.message for r in recs)
    else:
        assert any(r.check == "dx" and "dx written into dy" in r.message for r in recs if not r.passed)


def _entry(contract: Contract, op: str = "rmsnorm") -> KernelEntry:
    return KernelEntry(op, "k", lambda *a: None, contract, "kernel", "plugin", "here.py:1")


@pytest.mark.parametrize("mapping,contract_kw,message", [
    ({"dz": "dy"}, {}, r"unknown output 'dz' of op 'rmsnorm'; known outputs: y, forward, dx, dgamma"),
    ({"dx": "q"}, {}, r"unknown input 'q'; known buffers: x, gamma, dy, upstream"),
    ({"dx": "eps"}, {}, r"'eps' is not a tensor input"),
    ({"y": "dy"}, {}, r"cannot be written into the upstream gradient"),
    ({"dx": "dy"}, {"forward_only": True}, r"writes the gradient 'dx', but Contract\(forward_only=True\)"),
    ({"dx": "dy", "dgamma": "upstream"}, {}, r"writes both 'dx' and 'dgamma' into 'upstream'"),
])
def test_a_mapping_that_does_not_fit_the_op_is_a_registry_error(mapping, contract_kw, message):
    with pytest.raises(RegistryError, match=message):
        inplace.validate(_entry(Contract(inplace=mapping, **contract_kw)), REGISTRY.op("rmsnorm"))


def test_the_registration_checks_the_mapping_and_malformed_ones_are_refused():
    with pytest.raises(RegistryError, match=r"known outputs"):
        register_kernel("rmsnorm", name="inplace_bad_output", contract=Contract(inplace={"dw": "dy"}))(lambda *a: None)
    assert ("rmsnorm", "inplace_bad_output") not in REGISTRY.entries
    with pytest.raises(RegistryError, match=r"Contract\(inplace=...\) takes a dict"):
        Contract(inplace={"dx": 3})
    inplace.validate(_entry(DX_INTO_DY), REGISTRY.op("rmsnorm"))
    inplace.validate(_entry(Contract(inplace={"forward": "x"})), REGISTRY.op("rmsnorm"))
    assert [w.label for w in inplace.writes(Contract(inplace={"dx": "dy", "y": "x"}), REGISTRY.op("rmsnorm"))] == \
        ["arg0", "upstream"]
    assert "in place dx->dy" in DX_INTO_DY.describe()


def test_both_declarations_reach_the_judge_from_the_kernel_process():
    """The judge rebuilds a kernel's contract from what its kernel process describes."""
    from harness.execution.worker import entry_view as judges_view
    from harness.run.kernel_server import entry_data

    contract = Contract(forward_only=True, inplace={"y": "x"})
    seen = judges_view("softmax", "k", entry_data(_entry(contract, "softmax"))).contract
    assert seen.forward_only is True and seen.inplace == {"y": "x"}
