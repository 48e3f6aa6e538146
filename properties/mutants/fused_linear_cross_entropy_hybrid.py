"""Hand-written mutants of the hybrid fused linear + cross-entropy (kernels/fused_linear_ce_hybrid.py):
one real bug class each, as text patches re-executed in memory (harness.mutation.mutagen)."""

from __future__ import annotations

from harness.mutation.mutagen import register_catalog

OP = "fused_linear_cross_entropy"
MODULE = "kernels.fused_linear_ce_hybrid"
KERNEL = "triton_flce_hybrid"

CATALOG = [
    dict(
        name="cat.hybrid_g_overwrites_unread_logits",
        bug_class="aliasing",
        function="_forward",
        old="g = buf.view(x.dtype)[:c, :v]",
        new="g = buf.view(x.dtype)[:c, v:]",
        why="G written over the second half of each row's fp32 logits instead of the first: the "
        "softmax's second pass overwrites logits it has not read yet (16-bit dtypes)",
    ),
    dict(
        name="cat.hybrid_in_place_without_barrier",
        bug_class="race",
        function="_softmax_rows",
        old="            tl.debug_barrier()  # every warp has loaded this tile before any warp overwrites it\n",
        new="            pass\n",
        why="G written over the logits with no barrier between a tile's loads and its stores: one "
        "warp overwrites logits another warp has not loaded yet, so the gradients change from run "
        "to run (a race only a GPU shows: the interpreter runs a program's lanes together)",
        backends=["cuda"],
    ),
    dict(
        name="cat.hybrid_logits_in_input_dtype",
        bug_class="precision",
        function="_forward",
        old="_mm(xc, weight.t(), out=z)",
        new="z.copy_(torch.mm(xc, weight.t()))",
        why="the logits rounded to the input dtype before the softmax (Liger-Kernel's bf16 logits): "
        "|z| * 2^-9 lost on bf16, which large logits turn into a wrong loss and softmax",
    ),
    dict(
        name="cat.hybrid_upstream_ignored",
        bug_class="autograd",
        function="backward",
        old="if not bool(torch.all(upstream == 1)):",
        new="if False:",
        why="gradients computed in the forward returned as they are: an upstream gradient other "
        "than 1 (a scaled or weighted loss) is ignored",
    ),
    dict(
        name="cat.hybrid_dw_not_averaged",
        bug_class="reduction",
        function="_forward",
        old="dw = dw.mul_(inv).to(weight.dtype)",
        new="dw = dw.to(weight.dtype)",
        why="dW left as the sum over rows: the 1 / n_valid of the mean applied to dx only",
    ),
    dict(
        name="cat.hybrid_ignored_rows_in_loss",
        bug_class="masking",
        function="_softmax_rows",
        old="tl.store(LOSS + row, tl.where(valid, lse - z_t, 0.0))",
        new="tl.store(LOSS + row, lse - z_t)",
        why="ignored rows (padding tokens) still add lse - z[0] to the loss sum",
    ),
]

register_catalog(OP, kernel=KERNEL, module=MODULE, entries=CATALOG)
