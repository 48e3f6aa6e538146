"""The index-width cases (harness.ops.layouts): on CUDA each tensor input (an int64 target too),
the upstream gradient included, is stretched in turn by one huge row or column stride, so that an element offset a
kernel computes in int32 passes 2**31 and overflows (Liger-Kernel #251, #803). Checked here on
the CPU with the threshold shrunk to 2**10 (the real storages span 2**31 elements: GBs).

Bug classes: a stretched view whose largest offset does not pass the threshold (the overflow
never happens) or whose stride reaches it (Triton passes it as int64: no overflow either);
padding that is not NaN; the interpreter or a hypothesis strategy drawing a GPU-only layout (a
4 GB storage on the CPU); a case id that does not re-create its case; drop_int64_cast mutants
still listed apart on a GPU (never scored) or scored on the interpreter (survivors there)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings

from harness.cases.case import Case
from harness.errors import UsageError
from harness.mutation import campaign
from harness.registry.registry import REGISTRY, load_builtin_ops, load_project_kernels
from harness.ops import checks, layouts

SMALL = 2**10
OPS = ("rmsnorm", "layer_norm", "softmax", "swiglu", "cross_entropy", "fused_linear_cross_entropy")
LATER_OPS = ("rope", "matmul", "attention", "add_rmsnorm")  # their stretched inputs: test_declared_ops_index_width below
ARG_NAMES = {"rmsnorm": ["x", "gamma", "eps"], "fused_linear_cross_entropy": ["x", "weight", "target", "ignore_index"]}


@pytest.fixture
def small(monkeypatch):
    monkeypatch.setattr(layouts, "INDEX_WIDTH", SMALL)
    return SMALL


def storage_of(t: torch.Tensor) -> torch.Tensor:
    return torch.tensor([], dtype=t.dtype).set_(t.untyped_storage())


def element_offsets(t: torch.Tensor) -> torch.Tensor:
    idx = torch.zeros((), dtype=torch.long)
    for n, s in zip(t.shape, t.stride()):
        idx = (idx.unsqueeze(-1) + torch.arange(n) * s).reshape(-1)
    return idx


@pytest.mark.parametrize("layout", layouts.INDEX_WIDTH_LAYOUTS)
@pytest.mark.parametrize("shape", [(3, 7), (5, 33), (4, 17), (7,), (3, 4, 5)])
def test_a_stretched_view_holds_the_values_and_passes_the_threshold_with_strides_below_it(small, layout, shape):
    v = torch.randn(shape, dtype=torch.float64).to(torch.float32)
    placed = layouts.place(v, layout, "cpu")
    assert placed.shape == v.shape and placed.dtype == v.dtype and torch.equal(placed, v)
    wide = layouts.index_width_dim(layout, v.dim())
    assert wide == (0 if layout == layouts.INDEX_WIDTH_ROWS or v.dim() == 1 else v.dim() - 1)
    d, s = v.shape[wide], placed.stride(wide)
    assert s > small / (d - 1) and (d - 1) * s > small  # the largest offset passes the threshold ...
    assert max(placed.stride()) < small and s % 2 == 1  # ... while every stride stays an int32 below it
    offsets = element_offsets(placed)
    assert int(offsets.max()) > small and len(set(offsets.tolist())) == v.numel()  # no two elements alias
    storage = storage_of(placed)
    assert storage.numel() == int(offsets.max()) + 1
    assert int(torch.isnan(storage).sum()) == storage.numel() - v.numel()  # everything else is NaN padding


def test_2d_strides_are_the_layouts_row_and_column_strides(small):
    v = torch.randn(3, 7)
    rows, cols = (layouts.place(v, layout, "cpu") for layout in layouts.INDEX_WIDTH_LAYOUTS)
    assert rows.stride() == (layouts.index_width_stride(3), 1)
    assert cols.stride() == (1, layouts.index_width_stride(7))


def test_the_real_stride_stays_an_int32_and_the_last_offset_passes_2_31():
    for d in (3, 4, 5, 7, 17, 33):
        s = layouts.index_width_stride(d)
        assert s < 2**31 < (d - 1) * s
    with pytest.raises(ValueError, match="at least 3"):
        layouts.index_width_stride(2)  # one step would need a stride of 2**31: Triton passes int64


def test_an_index_tensor_is_stretched_with_minus_one_padding_and_a_scalar_stays(small):
    target = torch.tensor([0, 3, 1, 2])
    placed = layouts.place(target, layouts.INDEX_WIDTH_ROWS, "cpu")
    assert placed.dtype == torch.int64 and torch.equal(placed, target)
    s = placed.stride(0)
    assert s < small < 3 * s and s % 2 == 1  # T + 3 * s passes the threshold, s stays an int32
    storage = storage_of(placed)
    assert storage.numel() == 3 * s + 1 and int((storage == -1).sum()) == storage.numel() - 4
    assert layouts.place(torch.tensor(2.5), layouts.INDEX_WIDTH_COLS, "cpu").dim() == 0


def test_the_cpu_refuses_a_real_index_width_storage():
    with pytest.raises(ValueError, match="GPU only"):  # refused before anything is allocated
        layouts.place(torch.ones(3, 7), layouts.INDEX_WIDTH_ROWS, "cpu")
    layouts.release()  # nothing was placed on a GPU: a no-op


def test_for_input_stretches_the_named_input_only():
    assert layouts.for_input(layouts.INDEX_WIDTH_ROWS, 0, "x", "x") == layouts.INDEX_WIDTH_ROWS
    assert layouts.for_input(layouts.INDEX_WIDTH_ROWS, 1, "weight", "x") == "contiguous"
    assert layouts.for_input(layouts.INDEX_WIDTH_COLS, -1, layouts.UPSTREAM, layouts.UPSTREAM) == layouts.INDEX_WIDTH_COLS
    assert layouts.for_input("transposed", 0, "x", None) == "transposed"
    assert layouts.for_input(layouts.MIXED, -1, layouts.UPSTREAM, None) == "transposed"


# --- the cases -------------------------------------------------------------------------------

def spec(op):
    load_builtin_ops()
    return REGISTRY.op(op)


def index_width(cases):
    return [c for c in cases if c["layout"] in layouts.INDEX_WIDTH_LAYOUTS]


def stretched(inputs) -> list[str]:
    """Which of the case's tensors (args by position, then 'upstream') have a storage past the view."""
    named = [(str(i), a) for i, a in enumerate(inputs.args)] + [("upstream", inputs.upstream)]
    return [n for n, t in named if isinstance(t, torch.Tensor) and storage_of(t).numel() > t.numel()]


@pytest.mark.parametrize("op", OPS)
def test_cuda_floor_stretches_every_float_input_in_both_layouts_and_the_interpreter_never(small, op):
    s = spec(op)
    assert not index_width(s.floor_cases(backend="interpreter"))
    cases = index_width(s.floor_cases(backend="cuda"))
    assert {c["layout"] for c in cases} == set(layouts.INDEX_WIDTH_LAYOUTS)
    assert {c["dtype"] for c in cases} == {"bfloat16", "float32"}
    ids = [c.id for c in cases]
    assert len(set(ids)) == len(ids)
    for c in cases:
        assert f"layout={c['layout']},wide={c['wide']}," in c.id  # the id shows the layout and the stretched input
        s.validate_case(c)
        again = Case.parse(c.id)
        assert again == c
        first, second = s.make_inputs(c, "cpu"), s.make_inputs(again, "cpu")
        names = [i.name for i in s.decl.inputs] if hasattr(s, "decl") else ARG_NAMES[op]
        want = "upstream" if c["wide"] == layouts.UPSTREAM else str(names.index(c["wide"]))
        assert stretched(first) == [want]  # the named input stretched, the others contiguous
        for a, b in zip([*first.args, first.upstream], [*second.args, second.upstream]):
            if isinstance(a, torch.Tensor):
                assert torch.equal(a, b) and a.stride() == b.stride()  # the id re-creates the case


@pytest.mark.parametrize("op, rows, cols", [
    ("rmsnorm", {"x", "gamma", "upstream"}, {"x", "upstream"}),  # a 1-D input has one stride: rows only
    ("layer_norm", {"x", "weight", "bias", "upstream"}, {"x", "upstream"}),
    ("softmax", {"x", "upstream"}, {"x", "upstream"}),
    ("swiglu", {"a", "b", "upstream"}, {"a", "b", "upstream"}),
    ("cross_entropy", {"logits", "target"}, {"logits"}),  # a scalar upstream gradient; the int64 target: rows
    ("fused_linear_cross_entropy", {"x", "weight", "target"}, {"x", "weight"}),
    ("rope", {"x", "cos", "sin", "upstream"}, {"x", "cos", "sin", "upstream"}),
    ("matmul", {"a", "b", "bias", "upstream"}, {"a", "b", "upstream"}),  # bias is 1-D: rows only
    ("attention", {"q", "k", "v", "upstream"}, {"q", "k", "v", "upstream"}),
])
def test_the_stretched_inputs_are_every_tensor_input_and_the_upstream_gradient(op, rows, cols):
    cases = index_width(spec(op).floor_cases(backend="cuda"))
    assert {c["wide"] for c in cases if c["layout"] == layouts.INDEX_WIDTH_ROWS} == rows
    assert {c["wide"] for c in cases if c["layout"] == layouts.INDEX_WIDTH_COLS} == cols


@pytest.mark.parametrize("op", OPS)
def test_generated_cases_never_draw_an_index_width_layout(op):
    s = spec(op)
    for backend in ("interpreter", "cuda"):
        @settings(max_examples=30, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @given(s.case_strategy(backend=backend))
        def check(case):
            assert case["layout"] not in layouts.INDEX_WIDTH_LAYOUTS and case.get("wide") is None

        check()


@pytest.mark.parametrize("op, base", [
    ("rmsnorm", "rmsnorm:M=3,N=7,dtype=bfloat16,layout=index_width_rows,wide=x,values=normal,eps=1e-06,seed=1"),
    ("softmax", "softmax:M=3,N=7,dtype=bfloat16,layout=index_width_rows,wide=x,values=peaked,seed=1"),
    ("fused_linear_cross_entropy", "fused_linear_cross_entropy:N=3,D=17,V=7,dtype=bfloat16,layout=index_width_rows,"
                                   "wide=x,values=normal,ignored=none,ignore_index=-100,seed=1"),
])
def test_validation_names_the_wide_parameter(op, base):
    s = spec(op)
    s.validate_case(Case.parse(base))
    for bad, words in [
        (base.replace("wide=x,", ""), "missing parameter wide"),
        (base.replace("wide=x", "wide=nope"), "wide=nope is not allowed"),
        (base.replace("layout=index_width_rows", "layout=contiguous"), "wide=x is not allowed"),
        (base.replace("M=3", "M=2").replace("N=3", "N=2"), "at least 3"),
    ]:
        with pytest.raises(UsageError, match=words):
            s.validate_case(Case.parse(bad))
    with pytest.raises(UsageError, match="GPU-only"):
        layouts.check_backend(Case.parse(base), "interpreter")
    layouts.check_backend(Case.parse(base), "cuda")


def test_a_declared_op_still_rejects_an_unknown_layout():
    with pytest.raises(UsageError, match="layout=diagonal is not allowed"):
        spec("softmax").validate_case(Case.parse("softmax:M=3,N=7,dtype=float32,layout=diagonal,values=normal,seed=1"))


def test_the_inputs_check_compares_large_storages_in_chunks(monkeypatch):
    monkeypatch.setattr(checks, "CHUNK_BYTES", 16)
    t = torch.zeros(40)
    snap = checks.Snapshot([("x", t)])
    assert snap.changes() == []
    t[9] = 1.0
    t[30] = 2.0
    (change,) = snap.changes()
    assert change.startswith("x: 3 byte(s) changed, first at storage byte 38,")  # 1.0: 2 bytes, 2.0: 1 byte


@pytest.mark.parametrize("dtype,fill", [(torch.float32, float("nan")), (torch.int64, -1), (torch.bfloat16, float("nan"))])
def test_a_large_storage_of_one_fill_value_is_kept_as_its_exceptions_and_still_sees_every_write(monkeypatch, dtype, fill):
    """An index-width storage (one fill value around a small view) is not copied whole for the
    inputs check, and a write inside the view or in its padding is still found, element by element."""
    monkeypatch.setattr(checks, "COMPACT_BYTES", 1024)
    storage = torch.full((3 * 1000 + 7,), fill, dtype=dtype)
    view = storage.as_strided((3, 7), (1000, 1))
    view.copy_(torch.arange(21, dtype=torch.float32).reshape(3, 7).to(dtype))
    snap = checks.Snapshot([("x", view)])
    assert isinstance(snap.saved[0], checks._Sparse) and snap.saved[0].where.numel() == 21
    assert snap.changes() == []
    view[1, 2] = 99
    (change,) = snap.changes()
    assert change.startswith("x: 1 element(s) of") and change.endswith("inside the view")
    view[1, 2] = 9  # its value again: nothing changed
    assert snap.changes() == []
    storage[500] = 5  # the padding between two rows
    (change,) = snap.changes()
    assert change.endswith("outside the view (padding of its storage)")
    assert not isinstance(checks.Snapshot([("d", torch.randn(1000))]).saved[0], checks._Sparse)  # dense: a copy


# --- mutants ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def mutants():
    load_project_kernels()
    campaign.load_mutants()
    return REGISTRY.select(kind="mutant", pattern="*")


@pytest.mark.parametrize("op", LATER_OPS)
def test_the_project_kernel_holds_a_stretched_input_of_each_layout(small, op):
    """With the threshold shrunk the interpreter can run the GPU-only layouts: the project kernel
    honours every stride (one case per layout; the overflow itself shows only on a GPU)."""
    from harness.run.runner import run_case

    s = spec(op)
    entry = next(e for e in REGISTRY.select(kind="kernel", pattern="*") if e.op == op and e.origin == "project")
    cases = index_width(s.floor_cases(backend="cuda"))
    for layout in layouts.INDEX_WIDTH_LAYOUTS:
        case = next(c for c in cases if c["layout"] == layout and c["wide"] != layouts.UPSTREAM)
        run = run_case(s, entry, case, backend="interpreter", device="cpu")
        assert run.records and all(r.passed for r in run.records), [r.message for r in run.records if not r.passed]


def test_drop_int64_cast_mutants_are_scored_on_cuda_and_listed_apart_on_the_interpreter(mutants):
    dropped = [e for e in mutants if e.meta.get("operator") == "drop_int64_cast"]
    assert {e.op for e in dropped} == set(OPS) | set(LATER_OPS)
    for e in dropped:
        assert e.meta["backends"] == ["cuda"]
        assert campaign.observable_on(e, "cuda") and not campaign.observable_on(e, "interpreter")


def test_each_op_has_a_gpu_only_int32_row_offset_catalog_mutant(mutants):
    found = {e.op: e for e in mutants if e.name == "cat.row_offset_int32"}
    assert set(found) == set(OPS) | set(LATER_OPS)
    for e in found.values():
        assert e.origin == "catalog" and e.meta["operator"] == "catalog:index-width"
        assert campaign.observable_on(e, "cuda") and not campaign.observable_on(e, "interpreter")
        assert "#251" in e.description and "#803" in e.description
        removed = [line for line in e.meta["diff"].splitlines() if line.startswith("-")]
        assert any("tl.int64" in line for line in removed)


# --- one index-width case at a time per GPU (harness.run.gpu_slot) ---------------------------

def _hold_slot(lock: str, log: str, who: int) -> None:
    import time as _time

    from harness.run import gpu_slot

    gpu_slot.lock_path = lambda: __import__("pathlib").Path(lock)
    case = {"layout": layouts.INDEX_WIDTH_ROWS}

    class _Case:
        def get(self, key, default=None):
            return case.get(key, default)

    with gpu_slot.exclusive(_Case(), "cuda"):
        with open(log, "a") as fh:
            fh.write(f"{who} in {_time.monotonic()}\n")
        _time.sleep(0.4)
        with open(log, "a") as fh:
            fh.write(f"{who} out {_time.monotonic()}\n")


def test_index_width_cases_take_the_gpu_one_at_a_time(tmp_path):
    """Three processes entering the slot together never overlap inside it."""
    import multiprocessing as mp

    lock, log = str(tmp_path / "gpu.lock"), str(tmp_path / "log")
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_hold_slot, args=(lock, log, i)) for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    events = [line.split() for line in open(log).read().splitlines()]
    assert len(events) == 6
    events.sort(key=lambda e: float(e[2]))
    for k in range(0, 6, 2):  # in, out of the same process, then the next one
        assert events[k][1] == "in" and events[k + 1][1] == "out" and events[k][0] == events[k + 1][0]


def test_other_cases_and_the_interpreter_take_no_lock(monkeypatch):
    from harness.run import gpu_slot

    def no_lock():
        raise AssertionError("no lock may be taken")

    monkeypatch.setattr(gpu_slot, "lock_path", no_lock)
    with gpu_slot.exclusive({"layout": "contiguous"}, "cuda"):
        pass
    with gpu_slot.exclusive({"layout": layouts.INDEX_WIDTH_ROWS}, "interpreter"):
        pass


def test_the_kernel_process_gives_its_memory_back_before_the_next_index_width_case(monkeypatch, tmp_path):
    """The run-43 OOM: kernel processes kept the last case's graph and the allocator's poisoned
    blocks (17 GB each) after an index-width case. The slot now releases the kernel side (through
    the host) and this process before it lets the next case in, and only for index-width cases."""
    from harness.run import gpu_slot

    monkeypatch.setattr(gpu_slot, "lock_path", lambda: tmp_path / "gpu.lock")
    order = []
    monkeypatch.setattr(layouts, "release", lambda: order.append("judge"))
    with gpu_slot.exclusive({"layout": layouts.INDEX_WIDTH_COLS}, "cuda", lambda: order.append("kernel")):
        order.append("case")
    assert order == ["case", "kernel", "judge"]
    order.clear()
    with gpu_slot.exclusive({"layout": "contiguous"}, "cuda", lambda: order.append("kernel")):
        pass
    assert order == []


def test_a_session_release_drops_the_last_case_graph():
    from harness.run.kernel_host import Session

    session = Session(lambda x: x * 2)
    x = torch.ones(3)
    assert session.forward((x,), (0,)).error is None
    assert session.out is not None and session.leaves
    session.release()
    assert session.out is None and session.leaves == []


def test_the_kernel_process_answers_a_release(tmp_path):
    """The judge's ``release`` request reaches the kernel process and comes back answered; the
    process then still serves the next case."""
    from harness.run.kernel_process import KernelProcess, ProcessHost
    from harness.settings import current

    proc = KernelProcess(plugins=(), extra_modules=(), backend="interpreter", settings=current())
    try:
        proc.bind("rmsnorm", "triton_rmsnorm")
        host = ProcessHost(proc)
        host.release()
        assert proc.proc is not None and proc.proc.is_alive()
        x, w = torch.randn(2, 4), torch.randn(4)
        assert host.forward((x, w, 1e-6), ()).error is None
    finally:
        proc.close()


# --- tensors of one call in different layouts ----------------------------------------------------

def _float_tensors(inputs) -> dict[str, torch.Tensor]:
    found = {f"arg{i}": a for i, a in enumerate(inputs.args) if isinstance(a, torch.Tensor) and a.is_floating_point()}
    if inputs.upstream is not None and inputs.upstream.dim() > 0:
        found["upstream"] = inputs.upstream
    return found


# (cross_entropy has one float tensor, its logits: its upstream gradient is a scalar)
@pytest.mark.parametrize("op", ["rmsnorm", "fused_linear_cross_entropy", "layer_norm", "softmax", "swiglu"])
def test_each_stride_of_each_pair_of_tensors_differs_in_some_floor_case(op):
    """Bug class: one tensor indexed with another's strides (dy read with x's, the weight with x's
    row stride). A pair of same-rank float tensors (inputs and upstream gradient) whose stride along
    some dim is equal in every case of the floor hides it: some case must make each stride differ."""
    load_builtin_ops()
    spec = REGISTRY.op(op)
    differ: dict[tuple[str, str, int], bool] = {}
    for case in spec.floor_cases(backend="interpreter"):
        if min(int(v) for k, v in case.params if k in ("M", "N", "D", "V")) < 3:
            continue  # with a dim of 1 or 2, strides can be equal whatever the layout
        tensors = _float_tensors(spec.make_inputs(case, "cpu"))
        for a, ta in tensors.items():
            for b, tb in tensors.items():
                for d in range(ta.dim()) if a < b and ta.dim() == tb.dim() else ():
                    differ[(a, b, d)] = differ.get((a, b, d), False) or ta.stride(d) != tb.stride(d)
    assert differ and all(differ.values()), {pair: d for pair, d in differ.items() if not d}
