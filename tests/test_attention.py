"""The attention op, its oracle and kernels.attention: the project kernel passes small cases of
every hazard (GQA/MQA, decode, chunked prefill, S > T rows without keys, D = 40, the kv_cache
and bshd layouts, large and all-negative scores); wrong twins fail the check their bug class
targets; out-of-contract inputs are rejected before any launch."""

import pytest
import torch
import torch.nn.functional as F

from harness.cases.case import Case
from harness.errors import UsageError
from harness.registry.registry import REGISTRY, Contract, KernelEntry, load_builtin_ops
from harness.run.runner import run_case
from kernel_checks import assert_rejected
from kernels import attention as k
from oracles.attention import allowed_keys, attention_backward, attention_reference

load_builtin_ops()
SPEC = REGISTRY.op("attention")

GOOD_CASES = [
    # GQA chunked prefill in a KV cache, D below its tile
    "attention:B=1,Hq=4,Hkv=2,S=5,T=19,D=40,dtype=float32,layout=kv_cache,values=normal,causal=true,scale=0.3,seed=1",
    # MQA decode, bf16, scores of +-100
    "attention:B=2,Hq=3,Hkv=1,S=1,T=33,D=16,dtype=bfloat16,layout=bshd,values=large_logits,causal=false,scale=0.125,seed=2",
    # S > T: 17 query rows without keys; every score near -150
    "attention:B=1,Hq=2,Hkv=2,S=20,T=3,D=32,dtype=float16,layout=mixed,values=negative_logits,causal=true,scale=0.3,seed=3",
]


def _run(fn, case_id, name=None):
    entry = KernelEntry("attention", name or fn.__name__, fn, Contract(deterministic=False), "kernel", "test", "here")
    run = run_case(SPEC, entry, Case.parse(case_id), backend="interpreter", device="cpu")
    return {r.check: r for r in run.records}


@pytest.mark.parametrize("case_id", GOOD_CASES)
def test_the_project_kernel_passes_small_cases(case_id):
    records = _run(k.attention, case_id)
    failed = {c: r.message[:200] for c, r in records.items() if not r.passed}
    assert not failed, failed
    assert {"forward", "dq", "dk", "dv"} <= set(records)


# --- wrong twins: torch attention with one FlashAttention bug each --------------------------------

def _torch_attention(q, k_, v, causal, scale, *, top_left=False, interleave=True, guard=True):
    g = q.shape[1] // k_.shape[1]
    repeat = (lambda t: t.repeat_interleave(g, dim=1)) if interleave else (lambda t: t.repeat(1, g, 1, 1))
    kf, vf = repeat(k_.float()), repeat(v.float())
    s, t = q.shape[2], k_.shape[2]
    allowed = torch.ones((s, t), dtype=torch.bool).tril(0 if top_left else t - s) if causal else torch.ones((s, t), dtype=torch.bool)
    p = torch.softmax(((q.float() @ kf.transpose(-1, -2)) * scale).masked_fill(~allowed, float("-inf")), dim=-1)
    if guard:
        p = torch.where(allowed.any(-1, keepdim=True), p, torch.zeros_like(p))
    return (p @ vf).to(q.dtype)


def causal_top_left(q, k_, v, causal, scale):
    """torch's is_causal convention: query i sees keys j <= i, not j <= i + T - S."""
    return _torch_attention(q, k_, v, causal, scale, top_left=True)


def gqa_round_robin(q, k_, v, causal, scale):
    """Query head h reads key/value head h % Hkv (repeat) instead of h // G (repeat_interleave)."""
    return _torch_attention(q, k_, v, causal, scale, interleave=False)


def rows_without_keys_nan(q, k_, v, causal, scale):
    """A query row that sees no key comes out as softmax of a row of -inf: NaN instead of 0."""
    return _torch_attention(q, k_, v, causal, scale, guard=False)


def scale_twice(q, k_, v, causal, scale):
    return k.attention(q, k_, v, causal, scale * scale)


WRONG = [
    # (twin, a case it must fail, the check that fails there)
    (causal_top_left, "attention:B=1,Hq=1,Hkv=1,S=3,T=9,D=16,dtype=float32,layout=contiguous,values=normal,"
                      "causal=true,scale=0.3,seed=4", "forward"),
    (gqa_round_robin, "attention:B=1,Hq=4,Hkv=2,S=3,T=5,D=16,dtype=float32,layout=bshd,values=normal,"
                      "causal=false,scale=0.3,seed=5", "forward"),
    (rows_without_keys_nan, "attention:B=1,Hq=1,Hkv=1,S=6,T=2,D=16,dtype=float16,layout=contiguous,values=normal,"
                            "causal=true,scale=0.3,seed=6", "forward"),
    (scale_twice, "attention:B=1,Hq=2,Hkv=1,S=4,T=7,D=16,dtype=float32,layout=contiguous,values=normal,"
                  "causal=false,scale=0.3,seed=7", "forward"),
]


@pytest.mark.parametrize("twin, case_id, check", WRONG, ids=[w[0].__name__ for w in WRONG])
def test_wrong_twins_fail_the_check_their_bug_targets(twin, case_id, check):
    records = _run(twin, case_id)
    assert check in records and not records[check].passed, {c: r.passed for c, r in records.items()}


def test_the_same_twins_pass_where_their_bug_cannot_show():
    """The twins are right off their bug's inputs (so their failures above are the bug's): S == T
    for the top-left mask, G = 1 for the head map, S <= T for the rows without keys."""
    for twin, case_id in (
        (causal_top_left, "attention:B=1,Hq=1,Hkv=1,S=9,T=9,D=16,dtype=float32,layout=contiguous,values=normal,"
                          "causal=true,scale=0.3,seed=4"),
        (gqa_round_robin, "attention:B=1,Hq=2,Hkv=2,S=3,T=5,D=16,dtype=float32,layout=bshd,values=normal,"
                          "causal=false,scale=0.3,seed=5"),
        (rows_without_keys_nan, "attention:B=1,Hq=1,Hkv=1,S=2,T=6,D=16,dtype=float16,layout=contiguous,"
                                "values=normal,causal=true,scale=0.3,seed=6"),
    ):
        records = _run(twin, case_id)
        assert records["forward"].passed, records["forward"].message[:300]


# --- the oracle and the op ---------------------------------------------------------------------

def test_the_oracle_agrees_with_sdpa_and_its_explicit_backward():
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 5, 8, generator=g, dtype=torch.float64, requires_grad=True)
    kk = torch.randn(2, 2, 9, 8, generator=g, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, 2, 9, 8, generator=g, dtype=torch.float64, requires_grad=True)
    o = attention_reference(q, kk, v, True, 0.3)
    sdpa = F.scaled_dot_product_attention(q, kk.repeat_interleave(2, 1), v.repeat_interleave(2, 1),
                                          attn_mask=allowed_keys(5, 9, True), scale=0.3)
    torch.testing.assert_close(o, sdpa)
    do = torch.randn_like(o)
    for auto, explicit in zip(torch.autograd.grad(o, (q, kk, v), do), attention_backward(q, kk, v, True, 0.3, do)):
        torch.testing.assert_close(auto, explicit)


def test_rows_without_keys_are_zero_with_zero_gradients():
    q, kk, v = (torch.randn(1, 1, n, 4, dtype=torch.float64, requires_grad=True) for n in (5, 2, 2))
    o = attention_reference(q, kk, v, True, 0.5)
    assert torch.equal(o[0, 0, :3], torch.zeros(3, 4, dtype=torch.float64)) and torch.isfinite(o).all()
    dq, = torch.autograd.grad(o.sum(), (q,))
    assert torch.equal(dq[0, 0, :3], torch.zeros(3, 4, dtype=torch.float64))


def test_the_floor_reaches_each_hazard_and_ties_hq_to_hkv():
    cases = SPEC.floor_cases(backend="interpreter")
    dims = [{n: int(c[n]) for n in ("B", "Hq", "Hkv", "S", "T", "D")} for c in cases]
    assert all(d["Hq"] % d["Hkv"] == 0 for d in dims)
    assert any(d["S"] == 1 and d["T"] > 16 for d in dims)  # decode over several key blocks
    assert any(d["S"] > d["T"] and c["causal"] == "true" for d, c in zip(dims, cases))  # rows without keys
    assert any(d["Hkv"] == 1 and d["Hq"] > 1 for d in dims) and any(1 < d["Hkv"] < d["Hq"] for d in dims)
    assert {16, 32, 40, 64} <= {d["D"] for d in dims} and max(d["T"] for d in dims) == 257
    assert {c["layout"] for c in cases} >= {"bshd", "kv_cache", "mixed"}
    assert {c["values"] for c in cases} == {"normal", "large_logits", "negative_logits", "ties"}
    gpu = SPEC.floor_cases(backend="cuda")
    assert max(int(c["T"]) for c in gpu) > 4096 and 128 in {int(c["D"]) for c in gpu}


def test_a_case_with_hq_not_a_multiple_of_hkv_is_refused():
    with pytest.raises(UsageError, match="multiple of Hkv"):
        SPEC.validate_case(Case.parse("attention:B=1,Hq=3,Hkv=2,S=1,T=1,D=16,dtype=float32,layout=contiguous,"
                                      "values=normal,causal=true,scale=0.3,seed=1"))


def test_the_kv_cache_layout_pads_with_nan_past_t():
    inputs = SPEC.make_inputs(Case.parse("attention:B=1,Hq=2,Hkv=1,S=2,T=3,D=16,dtype=float32,layout=kv_cache,"
                                         "values=normal,causal=true,scale=0.3,seed=1"), "cpu")
    q, kk = inputs.args[0], inputs.args[1]
    assert q.stride(1) == 16 and q.stride(2) == 32  # [B, S, H, D] viewed as [B, H, S, D]
    assert kk.stride(2) == 16 and kk.stride(1) == 8 * 16  # 3 positions of an 8-long cache
    cache = kk.as_strided((1, 1, 8, 16), kk.stride())
    assert torch.isnan(cache[:, :, 3:]).all()


# --- contract -----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "make, error, words",
    [
        (lambda: (torch.ones(1, 3, 2, 16), torch.ones(1, 2, 2, 16), torch.ones(1, 2, 2, 16)), ValueError, "multiple of Hkv"),
        (lambda: (torch.ones(3, 2, 16), torch.ones(1, 2, 2, 16), torch.ones(1, 2, 2, 16)), ValueError, "4-D"),
        (lambda: (torch.ones(1, 2, 2, 16), torch.ones(1, 2, 3, 16), torch.ones(1, 2, 2, 16)), ValueError, "k and v"),
        (lambda: (torch.ones(1, 2, 2, 256), torch.ones(1, 2, 2, 256), torch.ones(1, 2, 2, 256)), ValueError, "128"),
        (lambda: (torch.ones(1, 2, 2, 16, dtype=torch.float64),) * 3, TypeError, "float64"),
        (lambda: (torch.ones(1, 2, 2, 16), torch.ones(1, 2, 2, 16).half(), torch.ones(1, 2, 2, 16)), TypeError, "cast k"),
    ],
)
def test_contract_errors_raise_before_any_launch(make, error, words, monkeypatch):
    q, kk, v = make()
    assert_rejected(lambda *a: k.attention(*a, True, 0.25), (q, kk, v), error, words, module=k,
                    monkeypatch=monkeypatch, no_launch=("_attention_forward", "_attention_backward"))


def test_causal_must_be_a_bool():
    x = torch.ones(1, 1, 2, 16)
    with pytest.raises(TypeError, match="causal must be a bool"):
        k.attention(x, x, x, 1, 0.25)


def test_the_bench_implementations_agree_on_a_small_input():
    """bench/attention.py: SDPA with the bottom-right mask and the project kernel give one result
    (on a GPU the same comparison runs at the workloads' sizes)."""
    import bench.attention as ba

    inputs = ba._make(1, 4, 2, 5, 19, 16, True, torch.float32)("cpu")
    results = [fn(*inputs.args) for fn in ba.implementations().values()]
    torch.testing.assert_close(results[0], results[1], atol=1e-5, rtol=1e-5)
    assert {w.quick for w in ba.workloads()} == {True, False}
