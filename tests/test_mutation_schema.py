"""Mutant schemata (harness.mutation.schema): a generated mutant run as its branch of its module's
schema behaves exactly as the same mutant built alone (outputs, errors, incompetence; through the
campaign's workers: status and killing case); the operators whose branch cannot join stay apart;
the clean kernels never run a schema; a branch that does not compile leaves the schema and its
mutant runs built alone."""

import ast
import json
import os

import pytest
import torch

from harness.mutation import mutagen, schema
from harness.registry.registry import load_project_kernels
from harness.run import specializations
from harness.settings import PROJECT_ROOT


def _mutants(module: str):
    """(mutations, plans, entry) of a project module, as mutagen registers them."""
    load_project_kernels()
    found = mutagen.mutations(module)
    return found, schema.plans(module, found), mutagen.project_entries(module)[0]


def _pair(module: str, i: int, plans, found, entry):
    m = found[i]
    in_schema = schema.SchemaMutant(plans[i], i + 1, module, entry.name, f"s{i}", lambda m=m: m.source)
    alone = mutagen.SourceMutant(module, entry.name, f"a{i}", lambda m=m: m.source)
    return in_schema, alone


def _outcome(fn, x: torch.Tensor):
    """Forward and gradient, or the error's type: what a check compares (rmsnorm: a gamma of ones)."""
    xx = x.detach().clone().requires_grad_(True)
    try:
        y = fn(xx) if "softmax" in fn.module else fn(xx, torch.linspace(0.5, 1.5, x.shape[-1]))
        (g,) = torch.autograd.grad(y, xx, torch.ones_like(y))
        return y.detach().nan_to_num(7.0), g.nan_to_num(7.0)
    except Exception as exc:
        return type(exc).__name__
    finally:
        release = getattr(fn, "release", None)
        if release:
            release()


def _same(a, b) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return all(torch.equal(p, q) for p, q in zip(a, b))


def test_the_schema_holds_each_eligible_mutant_as_a_branch_and_the_kept_apart_ones_stay_alone():
    found, plans, _ = _mutants("kernels.softmax")
    operators = {found[i].operator for i in plans}
    assert "drop_upcast" not in operators and {"drop_mask", "loop_bound", "sum_to_max"} <= operators
    assert any(m.operator == "drop_upcast" for m in found)  # generated, and kept apart
    # a change inside a shape (a perturbed constexpr there changes a tile's shape) stays alone
    tree = ast.parse("def f(x, BLOCK):\n    a = tl.arange(0, BLOCK + 1)\n    b = tl.zeros([BLOCK, 2], dtype=x)\n    c = x + 1\n")
    parents = schema._parents(tree)
    constants = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Constant)), key=lambda n: (n.lineno, n.col_offset))
    assert [schema._in_shape(n, parents) for n in constants] == [True, True, True, False]
    plan = plans[next(iter(plans))]
    source = schema.schema_source(plan.mutations)
    assert set(source.branches) == {i + 1 for i in plans}
    assert source.takes_mutant == {"_softmax_forward", "_softmax_backward"}
    tree = ast.parse(source.text)
    for fn in (f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name in source.takes_mutant):
        assert fn.args.args[-1].arg == schema.PARAM and ast.unparse(fn.decorator_list[0]).startswith(schema.JIT)
    # a helper that only its caller's branches reach still gets MUTANT, passed at the call
    rms = schema.schema_source(next(iter(_mutants("kernels.rmsnorm")[1].values())).mutations)
    assert "_rows_of" in rms.takes_mutant and f"{schema.PARAM}={schema.PARAM}" in rms.text


def test_schemata_off_builds_every_mutant_alone(monkeypatch):
    monkeypatch.setenv(schema.ENV, "0")
    found, plans, _ = _mutants("kernels.softmax")
    assert found and plans == {}


@pytest.mark.parametrize("module,shape", [("kernels.softmax", (37, 300)), ("kernels.rmsnorm", (19, 130))])
def test_a_schema_mutant_computes_exactly_what_it_computes_built_alone(module, shape):
    from harness.run import oob

    oob.install()  # an unmasked mutant's load is an error here, never a read of foreign memory
    found, plans, entry = _mutants(module)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(3))
    picked = list(plans)[::max(1, len(plans) // 12)]
    outcomes, competent = set(), set()
    built = plans[picked[0]].current()
    specializations.install()
    specializations.drain()
    for i in picked:
        in_schema, alone = _pair(module, i, plans, found, entry)
        a = _outcome(in_schema, x)
        keys_schema = specializations.drain()
        b = _outcome(alone, x)
        keys_alone = specializations.drain()
        assert _same(a, b), f"{found[i].operator} #{i + 1}:\n{found[i].diff}"
        assert in_schema.incompetent == alone.incompetent
        # the keys it would launch built alone: the same launches, the clean kernels' programs where
        # its change does not reach, a program of its own where it does
        own = {specializations.split(k)[1] for k in keys_schema}
        assert _programs(own) == _programs(set(keys_alone)), found[i].diff
        assert own == set(keys_alone)  # (one whose branch Triton refuses left the schema on the way: the same)
        outcomes.add(a if isinstance(a, str) else "ran")
        if alone.incompetent is None:
            competent.add(i + 1)
    # a competent mutant ran as its branch; one whose branch Triton refuses left the schema to be so alone
    assert plans[picked[0]].members >= competent
    # the interpreter runs the running mutant's branch only: one that left never made a rebuild
    assert plans[picked[0]].built is built
    assert "ran" in outcomes  # not only errors compared
    # the clean kernel never runs a schema: its jit functions are the module's own, undispatched
    clean = entry.fn
    assert not any(hasattr(v, "alone_source") for v in vars(__import__(module, fromlist=["x"])).values())
    assert clean is mutagen.project_entries(module)[0].fn


def _programs(keys: set[str]) -> set[str]:
    """Keys with their program digest left out."""
    import re

    return {re.sub(r"#[0-9a-f]+(\.[0-9]+)?\(", "#(", k) for k in keys}


def _forced_error(built, mutant_id: int):
    """A Triton CompilationError naming a line of ``mutant_id``'s branch, as CUDA raises for a
    branch whose two sides yield different types."""
    from triton.compiler.errors import CompilationError

    function, lo, _ = built.source.branches[mutant_id]
    start = dict(schema._def_lines(built))[function]
    lines = built.source.text.splitlines()[start - 1:]
    node = ast.parse("x = 1").body[0]
    node.lineno, node.col_offset = lo - start + 1, 4
    return CompilationError("\n".join(lines), node, "Mismatched type for x between then block and else block")


@pytest.mark.parametrize("who", ["another", "itself"])
def test_a_branch_that_does_not_compile_leaves_the_schema_and_its_mutant_runs_alone(who, monkeypatch):
    monkeypatch.setattr(schema, "_interpreting", lambda: False)  # a GPU's compiler: every branch compiled
    module = "kernels.softmax"
    found, plans, entry = _mutants(module)
    members = [i for i in plans if found[i].function == "_softmax_forward" and found[i].operator == "sum_to_max"]
    members += [i for i in plans if found[i].function == "_softmax_forward" and found[i].operator == "other_zero_to_one"]
    plan = schema.Plan(module, {i + 1: found[i] for i in plans})  # a fresh plan: this test's own schema
    runs, broken = [], []
    a_i, b_i = (members[0], members[1]) if len(members) > 1 else (members[0], list(plans)[0])
    a = schema.SchemaMutant(plan, a_i + 1, module, entry.name, "a", lambda m=found[a_i]: m.source)
    b = schema.SchemaMutant(plan, b_i + 1, module, entry.name, "b", lambda m=found[b_i]: m.source)
    x = torch.randn(5, 40, generator=torch.Generator().manual_seed(1))
    first = plan.current()
    culprit = b.id if who == "another" else a.id
    jitfn = first.mod.__dict__["_softmax_forward"]
    real = jitfn._schema_run

    def fails_once(*args, **kwargs):
        if not broken:
            broken.append(kwargs[schema.PARAM])
            raise _forced_error(first, culprit)
        runs.append(kwargs[schema.PARAM])
        return real(*args, **kwargs)

    jitfn._schema_run = fails_once
    alone_a = mutagen.SourceMutant(module, entry.name, "a1", lambda m=found[a_i]: m.source)
    alone_b = mutagen.SourceMutant(module, entry.name, "b1", lambda m=found[b_i]: m.source)
    specializations.install()
    specializations.drain()
    assert _same(_outcome(a, x), _outcome(alone_a, x))
    assert broken == [a.id] and culprit not in plan.members  # the branch's mutant left the schema
    assert plan.built is not first and a.incompetent is None
    keys = specializations.drain()
    if who == "another":  # rebuilt without it, the running mutant stays in the schema
        assert a.id in plan.members and plan.built is not None and culprit not in plan.built.source.branches
        assert any(schema.PARAM in specializations.split(k)[0] for k in keys if "_softmax_forward" in k)
    else:  # the running mutant's own branch: it runs built alone, from this launch on
        assert a.id not in plan.members and a.namespace
        launched = [specializations.split(k)[0] for k in keys if "_softmax_forward" in k]
        assert launched and not any(schema.PARAM in k for k in launched)  # its own module's program
    assert _same(_outcome(b, x), _outcome(alone_b, x))
    assert runs == [] or runs[0] != culprit


def _hinted(op: str, count: int) -> list[tuple[str, str]]:
    """A few generated schema mutants of ``op`` with the floor case that killed each last time."""
    from harness.mutation import campaign

    campaign.load_mutants()
    from harness.registry.registry import REGISTRY

    hints = json.loads((PROJECT_ROOT / "properties/mutants/kill_hints.json").read_text())["backends"]["interpreter"]
    out = []
    for e in sorted(REGISTRY.select(op=op, kind="mutant", pattern="gen.*"), key=lambda e: e.name):
        case = hints.get(e.name)
        if e.meta.get("schema") and case and case.startswith(f"{op}:") and e.meta["operator"] not in [o for _, o in out]:
            out.append((e.name, e.meta["operator"]))
            out[-1] = (e.name, case)
        if len(out) == count:
            break
    return out


def test_through_the_workers_each_mutant_has_the_same_status_and_killing_case_with_and_without_schemata(monkeypatch):
    from harness.execution.jobs import run_jobs
    from harness.execution.run_settings import RunSettings
    from harness.mutation import campaign

    picked = [(op, name, case) for op in ("softmax", "rmsnorm") for name, case in _hinted(op, 3)]
    assert len(picked) == 6
    results = {}
    for flag in ("1", "0"):
        monkeypatch.setenv(schema.ENV, flag)
        jobs = []
        for op, name, case in picked:
            settings = RunSettings("interpreter", 0, 0, (), campaign.mutant_modules(), case, stop_at_first_failure=True)
            jobs.append(settings.job(op, name, timeout=600))
        got = run_jobs(jobs, parallel=2)
        results[flag] = [(r.status, r.incompetent, [(x.check, x.case_id) for x in r.records if not x.passed][:1],
                          any(specializations.ALONE in k for x in r.records for k in (x.specializations or ())))
                         for r in got]
    assert [r[:3] for r in results["1"]] == [r[:3] for r in results["0"]], results
    assert all(r[3] for r in results["1"] if not r[1])  # the schema ran: its launches carry the alone key
    assert not any(r[3] for r in results["0"])
    assert sum(bool(r[2]) for r in results["1"]) >= 3, results  # killed ones among them, each by its case
