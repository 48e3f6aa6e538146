"""harness.registry.registry: the public plugin API's validation and error messages."""

import json

import pytest
import torch

from harness import Contract, register_kernel, register_mutant
from harness.errors import RegistryError
from harness.registry.registry import REGISTRY


def _cleanup(*names):
    for n in names:
        REGISTRY.entries.pop(("rmsnorm", n), None)


def test_duplicate_name_names_both_definitions():
    @register_kernel("rmsnorm", name="dup_test_kernel")
    def first(x, g, eps):
        return x

    try:
        with pytest.raises(RegistryError) as err:

            @register_mutant("rmsnorm", name="dup_test_kernel")
            def second(x, g, eps):
                return x

        msg = str(err.value)
        assert "dup_test_kernel" in msg and msg.count("test_registry.py:") == 2
    finally:
        _cleanup("dup_test_kernel")


def test_unknown_op_lists_known_ops():
    with pytest.raises(RegistryError, match="unknown op 'rmsnrom'.*rmsnorm"):
        register_kernel("rmsnrom", name="x")(lambda x, g, e: x)


@pytest.mark.parametrize(
    "kwargs",
    [dict(dtypes=("float32",)), dict(dtypes=()), dict(max_n=0), dict(max_n=1.5), dict(max_n=True)],
)
def test_bad_contract_is_rejected_when_built(kwargs):
    with pytest.raises(RegistryError):
        Contract(**kwargs)


def test_contract_violations():
    c = Contract(dtypes=(torch.float32,), max_n=8, contiguous=True)
    x = torch.zeros(4, 8)
    assert c.violations((x, torch.zeros(8), 1e-6)) == []
    assert "dtype float16" in c.violations((x.half(), torch.zeros(8)))[0]
    assert "max_n=8" in c.violations((torch.zeros(2, 9),))[0]
    assert "non-contiguous" in c.violations((torch.zeros(8, 4).t(),))[0]
    assert Contract().violations((torch.zeros(8, 4).t().half(),)) == []


def test_select_is_a_glob_on_names():
    names = [e.name for e in REGISTRY.select(op="rmsnorm", pattern="triton_*")]
    assert names == ["triton_rmsnorm"]
    assert REGISTRY.select(op="rmsnorm", kind="mutant", pattern="triton_*") == []


def test_select_takes_several_globs_separated_by_commas():
    from harness.registry.registry import REGISTRY, load_project_kernels

    load_project_kernels()
    both = REGISTRY.select(kind="kernel", pattern="triton_rmsnorm, triton_flce")
    assert {e.name for e in both} == {"triton_rmsnorm", "triton_flce"}
    assert REGISTRY.select(kind="kernel", pattern="nothing*,triton_rms*")[0].name == "triton_rmsnorm"


def _plugin(tmp_path, body: str) -> str:
    path = tmp_path / "stops.py"
    path.write_text(body)
    return str(path)


def test_ctrl_c_during_a_plugin_import_stops_the_run(tmp_path):  # bug class: Ctrl-C swallowed as a plugin error
    from harness.registry.loader import load_plugin

    path = _plugin(tmp_path, "raise KeyboardInterrupt\n")
    with pytest.raises(KeyboardInterrupt):
        load_plugin(path)
    with pytest.raises(KeyboardInterrupt):  # not left half-imported in sys.modules: a second load runs it again
        load_plugin(path)


def test_a_plugin_that_exits_at_import_is_a_plugin_error(tmp_path):  # bug class: sys.exit in user code ends the CLI
    from harness.errors import PluginError
    from harness.registry.loader import load_plugin

    with pytest.raises(PluginError, match=r"failed to import \(line 2\): SystemExit"):
        load_plugin(_plugin(tmp_path, "import sys\nsys.exit(3)\n"))


def test_an_origin_is_one_of_the_known_ones_and_reads_as_its_string():
    # bug class: origins as free strings, documented as four where eight are used, so a typo
    # ("projet") silently took an entry out of every "is it a project kernel" rule
    from harness.registry.registry import KernelEntry, Origin

    entry = KernelEntry("rmsnorm", "k", lambda: None, Contract(), "kernel", "plugin", "here")
    assert entry.origin is Origin.PLUGIN and entry.origin == "plugin" and f"{entry.origin}" == "plugin"
    assert json.dumps({"origin": entry.origin}) == '{"origin": "plugin"}'  # reports keep the string
    with pytest.raises(RegistryError, match="unknown origin 'projet'; one of project, plugin"):
        KernelEntry("rmsnorm", "k", lambda: None, Contract(), "kernel", "projet", "here")
    origins = {e.origin for e in REGISTRY.select()}
    assert origins and all(isinstance(o, Origin) for o in origins)


def test_a_kernel_of_the_wrong_signature_is_refused_with_the_ops_signature():
    # bug class: a kernel that fails every case with TypeError instead of one clear error at registration
    with pytest.raises(RegistryError) as err:

        @register_kernel("rmsnorm", name="sig_test_two_args")
        def two(x, gamma):
            return x

    msg = str(err.value)
    assert "'sig_test_two_args'" in msg and "takes (x, gamma)" in msg and "f(x[M, N], gamma[N], eps: float)" in msg
    assert "3 positional argument(s)" in msg and "def two(x, gamma, eps)" in msg and "\n" not in msg
    with pytest.raises(RegistryError, match="too many positional arguments"):
        register_kernel("rmsnorm", name="sig_test_one_arg")(lambda x: x)
    with pytest.raises(RegistryError, match="missing a required argument: 'scale'"):
        register_kernel("rmsnorm", name="sig_test_keyword_only")(lambda x, gamma, eps, *, scale: x)
    assert REGISTRY.select(op="rmsnorm", pattern="sig_test_*") == []


def test_kernels_that_python_can_call_with_the_ops_arguments_are_accepted():
    def wrapper(*args, **kwargs):
        return args[0]

    accepted = {"sig_ok_plain": lambda x, gamma, eps: x, "sig_ok_defaults": lambda x, gamma, eps=1e-6, extra=None: x,
                "sig_ok_varargs": wrapper, "sig_ok_head_and_rest": lambda x, *rest: x,
                "sig_ok_builtin": torch.add,  # a C function: no signature Python can read, accepted unchecked
                "sig_ok_autograd_apply": torch.autograd.Function.apply}
    try:
        for name, fn in accepted.items():
            register_kernel("rmsnorm", name=name)(fn)
        assert {e.name for e in REGISTRY.select(op="rmsnorm", pattern="sig_ok_*")} == set(accepted)
    finally:
        _cleanup(*accepted)
