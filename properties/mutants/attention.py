"""Hand-written mutants of the project's attention: the bug classes FlashAttention
implementations have had, one distinct class each.

Each entry is a text patch (``old`` -> ``new``, or several ``patches``, each matching exactly
once inside ``function``) applied to ``kernels/attention.py`` in memory and re-executed, so the
mutant runs through the real wrapper and autograd code. ``why`` says how the bug arises.
"""

from __future__ import annotations

from harness.mutation.mutagen import register_catalog
from properties.mutants import row_offset_int32

MODULE = "kernels.attention"
KERNEL = "triton_attention"
FORWARD, BACKWARD = "_attention_forward", "_attention_backward"

CATALOG = [
    dict(
        name="cat.running_max_zero",
        bug_class="online-softmax",
        function=FORWARD,
        old='m = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)',
        new="m = tl.zeros([BLOCK_M], dtype=tl.float32)",
        why="the running max starts at 0 instead of -inf: softmax is shift invariant, so only a row "
        "whose every score is far below 0 shows it, where exp(s - 0) underflows to 0 for every key",
    ),
    dict(
        name="cat.accumulator_not_rescaled",
        bug_class="online-softmax",
        function=FORWARD,
        old="acc = acc * alpha[:, None] + tl.dot(p, v",
        new="acc = acc + tl.dot(p, v",
        why="the accumulator is not rescaled by exp(m_old - m_new) when the running max grows: "
        "earlier key blocks keep the weight of a stale max; invisible with one key block",
    ),
    dict(
        name="cat.sum_not_rescaled",
        bug_class="online-softmax",
        function=FORWARD,
        old="l = l * alpha + tl.sum(p, axis=1)",
        new="l = l + tl.sum(p, axis=1)",
        why="the running sum is not rescaled when the max grows (the accumulator is): the "
        "normaliser overcounts earlier blocks; invisible with one key block",
    ),
    dict(
        name="cat.causal_off_by_one",
        bug_class="causal-mask",
        function=FORWARD,
        old="seen = seen & (cols[None, :] <= rows[:, None] + offset)",
        new="seen = seen & (cols[None, :] < rows[:, None] + offset)",
        why="the causal mask excludes the diagonal (< instead of <=): each query no longer sees "
        "its own key, and the first row of a square causal block sees nothing",
    ),
    dict(
        name="cat.causal_not_offset",
        bug_class="causal-mask",
        function=FORWARD,
        patches=[
            ("end = tl.minimum(T, start_m + BLOCK_M + offset)", "end = tl.minimum(T, start_m + BLOCK_M)"),
            ("seen = seen & (cols[None, :] <= rows[:, None] + offset)", "seen = seen & (cols[None, :] <= rows[:, None])"),
        ],
        why="the causal diagonal aligned to the top left (query i sees keys j <= i, torch's "
        "is_causal convention) instead of offset by T - S: right only when S == T; decoding with "
        "S = 1 then sees one key instead of the whole cache",
    ),
    dict(
        name="cat.backward_causal_not_offset",
        bug_class="causal-mask",
        function=BACKWARD,
        patches=[
            ("first = tl.maximum(0, start_n - offset) // BLOCK_M * BLOCK_M", "first = start_n // BLOCK_M * BLOCK_M"),
            ("seen = seen & (cols[None, :] <= rows[:, None] + offset)", "seen = seen & (cols[None, :] <= rows[:, None])"),
        ],
        why="the forward offsets the causal diagonal by T - S but the backward's mask and loop "
        "start do not (the two written apart): the gradients of chunked prefill and decoding miss "
        "every key past the query's own position",
    ),
    dict(
        name="cat.last_partial_block_dropped",
        bug_class="tail-block",
        function=FORWARD,
        old="for start_n in range(0, end, BLOCK_N):",
        new="for start_n in range(0, end // BLOCK_N * BLOCK_N, BLOCK_N):",
        why="the key loop runs over whole blocks only (T // BLOCK_N blocks): the last partial "
        "block of keys is dropped; invisible when T is a multiple of the block",
    ),
    dict(
        name="cat.scale_applied_twice",
        bug_class="scale",
        function=FORWARD,
        old='s = tl.dot(q, kt, input_precision="ieee") * scale',
        new='s = tl.dot(q, kt, input_precision="ieee") * scale * scale',
        why="the softmax scale applied twice (q pre-scaled by the caller's convention and again "
        "in the kernel): invisible at scale = 1",
    ),
    dict(
        name="cat.scale_missing",
        bug_class="scale",
        function=FORWARD,
        old='s = tl.dot(q, kt, input_precision="ieee") * scale',
        new='s = tl.dot(q, kt, input_precision="ieee")',
        why="the softmax scale never applied (the caller was expected to pre-scale q)",
    ),
    dict(
        name="cat.dk_scale_missing",
        bug_class="scale",
        function=BACKWARD,
        old="tl.store(DK + out, (dk * scale).to(DK.dtype.element_ty), mask=kv_mask)",
        new="tl.store(DK + out, dk.to(DK.dtype.element_ty), mask=kv_mask)",
        why="dk = ds^T q without the scale that ds = d(scale * q k^T) carries (dq has it)",
    ),
    dict(
        name="cat.gqa_query_head_as_kv_head",
        bug_class="gqa",
        function=FORWARD,
        old="hkv = h // G",
        new="hkv = h",
        why="the key/value head taken as the query head h instead of h // G: past the Hkv "
        "heads it reads other batches' heads or past the tensor; right only for Hq == Hkv",
    ),
    dict(
        name="cat.gqa_heads_interleaved",
        bug_class="gqa",
        function=FORWARD,
        old="hkv = h // G",
        new="hkv = h % (HQ // G)",
        why="query heads mapped to key/value heads round robin (h % Hkv, torch's repeat) instead "
        "of in groups (h // G, repeat_interleave, the GQA convention): right only for G = 1 or "
        "Hkv = 1",
    ),
    dict(
        name="cat.lse_in_input_dtype",
        bug_class="precision",
        function=FORWARD,
        old='tl.store(LSE + bh * S + rows, tl.where(empty, float("inf"), m + tl.log(denominator)), mask=row_ok)',
        new='tl.store(LSE + bh * S + rows, tl.where(empty, float("inf"), m + tl.log(denominator)).to(O.dtype.element_ty)'
        '.to(tl.float32), mask=row_ok)',
        why="the log-sum-exp saved in the input dtype: lse ~ 150 in bf16 is off by up to 0.5, and "
        "the backward's p = exp(s - lse) by a factor of up to e^0.5; invisible in fp32",
    ),
    dict(
        name="cat.lse_without_max",
        bug_class="online-softmax",
        function=FORWARD,
        old='tl.where(empty, float("inf"), m + tl.log(denominator))',
        new='tl.where(empty, float("inf"), tl.log(denominator))',
        why="the saved log-sum-exp is log(l) without the running max it was shifted by: the "
        "backward's p = exp(s - lse) is off by exp(m)",
    ),
    dict(
        name="cat.head_dim_mask_dropped",
        bug_class="mask",
        function=FORWARD,
        patches=[
            ("mask=row_ok[:, None] & dim_ok[None, :], other=0.0).to(tl.float32)\n    k_base",
             "mask=row_ok[:, None], other=0.0).to(tl.float32)\n    k_base"),
            ("mask=col_ok[None, :] & dim_ok[:, None], other=0.0)", "mask=col_ok[None, :], other=0.0)"),
        ],
        why="q and k loaded without the mask on the head dim: with D below the power-of-two tile "
        "(D = 40 in a 64-wide tile) the scores sum products of whatever lies past each row; "
        "invisible when D is a power of two",
    ),
    dict(
        name="cat.empty_row_shift_unguarded",
        bug_class="nonfinite",
        function=FORWARD,
        old='shift = tl.where(m_new == float("-inf"), 0.0, m_new)',
        new="shift = m_new",
        why="the online rescaling exp(m - m_new) is not guarded for a row that has seen only "
        "-inf: exp(-inf - (-inf)) = NaN; causal with S > T has such rows (no key at all)",
    ),
    dict(
        name="cat.empty_row_division",
        bug_class="nonfinite",
        function=FORWARD,
        old="denominator = tl.where(empty, 1.0, l)",
        new="denominator = l",
        why="o = acc / l with l = 0 on a row that sees no key: 0 / 0 = NaN instead of 0",
    ),
    dict(
        name="cat.backward_p_unmasked",
        bug_class="causal-mask",
        function=BACKWARD,
        old="p = tl.where(seen, tl.exp(s - lse[:, None]), 0.0)",
        new="p = tl.exp(s - lse[:, None])",
        why="the recomputed p is not masked in the backward (the forward masked s): masked keys "
        "get exp(s - lse) > 0 and feed dv, dk and dq",
    ),
    dict(
        name="cat.dq_without_atomics",
        bug_class="race",
        function=BACKWARD,
        old="tl.atomic_add(DQ + row_base * D + rows[:, None] * D + dims[None, :], dq, mask=q_mask)",
        new="tl.store(DQ + row_base * D + rows[:, None] * D + dims[None, :], "
        "tl.load(DQ + row_base * D + rows[:, None] * D + dims[None, :], mask=q_mask) + dq, mask=q_mask)",
        why="dq accumulated across key blocks by a plain load-add-store: programs of different "
        "key blocks race on the same dq rows; only a GPU runs them at once (the interpreter runs "
        "programs in turn, so the sum is right there)",
        backends=["cuda"],
    ),
    row_offset_int32(
        function=FORWARD,
        old="dims = tl.arange(0, BLOCK_D).to(tl.int64)",
        new="dims = tl.arange(0, BLOCK_D)",
        what="the head-dim index left in int32 (dims * stride_qd, dims * stride_kd computed in int32)",
    ),
]

register_catalog("attention", kernel=KERNEL, module=MODULE, entries=CATALOG)
