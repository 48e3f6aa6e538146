"""pytest plugin: the registered kernels' cases as pytest items.

    pytest --verify-plugin my_kernels.py [--verify-op OP] [--verify-select GLOB]
           [--verify-max-examples N] [--verify-backend B] [--verify-seed N]

Installed (``pip install .``) it loads itself through the ``pytest11`` entry point; from a
checkout, load it by name: ``pytest -p harness.pytest_plugin --verify-plugin ...``.

One item per (kernel, case): the op's floor cases, then the generated cases of the hypothesis
sequence for the seed. The list is known at collection time without running a kernel: it is
the sequence verify draws for a kernel that passes (hypothesis, seeded and without a database,
draws the same examples in every process), so every pytest-xdist worker collects the same
items in the same order. Item ids hold the case id (``-k``, ``--lf``, ``--junitxml`` work as
usual). A failing item reports the same text as verify; an item whose only failures are
declared waivers is skipped with the reason. No shrinking here: ``python -m harness verify``
shrinks a failing generated case.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from vocabulary import EntryKind

__all__ = ["generated_cases"]


def pytest_addoption(parser) -> None:
    group = parser.getgroup("triton-verify", "Triton kernels against float64 oracles (triton-verify)")
    group.addoption("--verify-plugin", action="append", default=[], metavar="FILE",
                    help="a plugin file that registers kernels; its kernels' cases become test items (repeatable)")
    group.addoption("--verify-op", default=None, metavar="OP", help="only kernels of this op")
    group.addoption("--verify-select", default="*", metavar="GLOB", help="glob(s) on kernel names, comma-separated")
    group.addoption("--verify-max-examples", type=int, default=None, metavar="N",
                    help="generated cases per kernel after the floor (default: verify's, 30 on the interpreter)")
    group.addoption("--verify-backend", default="auto", metavar="B", help="auto|cuda|interpreter (default: auto)")
    group.addoption("--verify-seed", type=int, default=0, metavar="N", help="hypothesis seed (default: 0)")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args) -> None:
    """Before any conftest or test module is imported (and decorates its Triton kernels): the
    interpreter when torch sees no GPU, so a test needs no ``TRITON_INTERPRET=1`` by hand."""
    from harness.run.backend import interpret_without_gpu

    interpret_without_gpu()


def _plugins(config) -> list[Path]:
    return [Path(p).resolve() for p in config.getoption("verify_plugin") or []]


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "triton_verify: one kernel on one case (the triton-verify pytest plugin)")
    plugins = _plugins(config)
    if not plugins:
        return
    from harness.errors import HarnessError
    from harness.registry import loader
    from harness.testing import prepare

    try:
        config._verify_backend = prepare(config.getoption("verify_backend"))  # before anything imports triton
        loader.load_all(plugins=[str(p) for p in plugins])
        if config.getoption("verify_op"):
            from harness.registry.registry import REGISTRY

            REGISTRY.op(config.getoption("verify_op"))
    except HarnessError as exc:
        raise pytest.UsageError(f"triton-verify: {exc}") from None
    # no file arguments: collect the plugin files instead of the configured testpaths
    source = getattr(config, "args_source", None)
    if source is not None and source != pytest.Config.ArgsSource.ARGS:
        config.args = [str(p) for p in plugins]


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent):
    """A --verify-plugin file is collected as its kernels' cases, never imported as a test module
    (the registry has already imported it)."""
    if module_path.resolve() in _plugins(parent.config):
        return VerifyFile.from_parent(parent, path=module_path)
    return None


def generated_cases(spec, *, backend: str, seed: int, max_examples: int) -> list:
    """The generated cases verify runs for a kernel that passes them all, in order, without
    running any kernel (harness.run.suite draws with the same settings)."""
    from harness.cases.drawing import drawn_cases

    if max_examples <= 0:
        return []
    drawn = drawn_cases(spec, backend=backend, seed=seed, max_examples=max_examples)
    return list({case.id: case for case in drawn}.values())  # a case drawn twice runs once


class VerifyFile(pytest.File):
    def collect(self):
        from harness.registry.registry import REGISTRY
        from harness.settings import current as current_settings

        config = self.config
        backend = config._verify_backend
        max_examples = config.getoption("verify_max_examples")
        max_examples = current_settings().max_examples(backend.name) if max_examples is None else max_examples
        seed = config.getoption("verify_seed")
        entries = [e for e in REGISTRY.select(op=config.getoption("verify_op"), kind=EntryKind.KERNEL,
                                              pattern=config.getoption("verify_select"))
                   if e.plugin and Path(e.plugin).resolve() == self.path.resolve()]
        cases_of: dict[str, list] = {}
        for entry in entries:
            if entry.op not in cases_of:
                spec = REGISTRY.op(entry.op)
                cases_of[entry.op] = [*spec.floor_cases(backend=backend.name),
                                      *generated_cases(spec, backend=backend.name, seed=seed, max_examples=max_examples)]
            for case in cases_of[entry.op]:
                yield VerifyItem.from_parent(self, name=f"{entry.name}[{case.id}]", entry=entry, case=case)


class CheckFailed(Exception):
    """The failed records of one item."""


class VerifyItem(pytest.Item):
    def __init__(self, *, entry, case, **kw):
        super().__init__(**kw)
        self.entry, self.case = entry, case
        self.add_marker(pytest.mark.triton_verify)

    def runtest(self) -> None:
        from harness.registry.registry import REGISTRY
        from harness.run.suite import SuitePlan, run_suite

        backend = self.config._verify_backend
        plan = SuitePlan(backend=backend.name, seed=self.config.getoption("verify_seed"), max_examples=0,
                         only_case=self.case)
        records = run_suite(REGISTRY.op(self.entry.op), self.entry, plan, device=backend.device)
        failed = [r.to_dict() for r in records if not r.passed]
        if failed:
            raise CheckFailed(failed)
        waived = [r for r in records if r.waived]
        if waived:
            pytest.skip("waived: " + "; ".join(sorted({f"{r.check}: {r.waived}" for r in waived})))

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, CheckFailed):
            from reports.console import failure_text

            return "\n".join(failure_text(r) for r in excinfo.value.args[0])
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, f"{self.entry.name} {self.case.id}"
