"""The train-check network as a declared op, so that its two paths are judged by the error model
every op is judged by (harness.compare.rounding through harness.ops.derive), not a table of its own.

``Linear -> RMSNorm -> SiLU -> Linear`` with its mean squared error, as one function of the
batch, its targets and the parameters: ``f(x[B, I], target[B, O], w1[H, I], b1[H], gamma[H],
w2[O, H], b2[O], eps) -> (pred[B, O], loss)``. The float64 reference normalises with the
registered rmsnorm op's own reference, so the network's oracle is the op's oracle between two
linear layers. The allowed error of each prediction and each parameter gradient is then the
ops': twice the spread of the float64 network when each input (the batch, the targets, each
parameter, the upstream gradients) is rounded within fp32, plus (8 + 2 sqrt(n)) fp32 roundings
of the terms for the longest sum (n = max(I, H)), plus one fp32 ulp of the result. The terms
are each layer's sums with every sign made positive, layer by layer from the loss back: a
prediction's |silu(z)| @ |w2|^T + |b2|, dL/dpred's 2 (|pred's terms| + |target|) / (B O), and
through the norm the rmsnorm op's own terms (its declaration's) on that upstream. A gradient's
default terms, |result|, failed fp32 torch itself: dw1 = dh^T x sums 32 rows that cancel.
"""

from __future__ import annotations

import torch

from harness.cases.case import Case
from harness.compare.allclose import Comparison
from harness.ops import checks
from harness.ops.derive import DeclaredOp
from harness.registry.declare import OpDecl, Scalar, Tensor
from harness.registry.opspec import OpInputs

# the network's parameters (torch.nn.Sequential names) in the op's input order, after x and target
PARAMETERS = {"0.weight": "w1", "0.bias": "b1", "1.weight": "gamma", "3.weight": "w2", "3.bias": "b2"}


def declaration(rmsnorm: OpDecl, eps: float) -> OpDecl:
    """The network's OpDecl, normalising with the rmsnorm op's float64 reference and bounding
    what its sums add with the rmsnorm op's terms (``rmsnorm``: that op's declaration)."""
    silu = torch.nn.functional.silu

    def reference(x, target, w1, b1, gamma, w2, b2, eps):
        pred = silu(rmsnorm.reference(x @ w1.T + b1, gamma, eps)) @ w2.T + b2
        return pred, torch.nn.functional.mse_loss(pred, target)

    def terms(x, target, w1, b1, gamma, w2, b2, eps, dpred, dloss):
        """Per check, the size of the terms its sums add, layer by layer, each layer's taken on the
        terms of what reaches it (the absolute values: the sums with every sign made positive)."""
        h = x @ w1.T + b1
        z = rmsnorm.reference(h, gamma, eps)
        s = silu(z)
        pred_terms = s.abs() @ w2.abs().T + b2.abs()
        g_terms = dloss.abs() * 2.0 * (pred_terms + target.abs()) / target.numel() + dpred.abs()  # dL/dpred
        slope = torch.sigmoid(z) * (1.0 + z * (1.0 - torch.sigmoid(z)))  # silu'(z)
        dz_terms = (g_terms @ w2.abs()) * slope.abs()
        _, dh_terms, dgamma_terms = rmsnorm.terms(h.abs(), gamma.abs(), eps, dz_terms)
        return (pred_terms, None, dh_terms.T @ x.abs(), dh_terms.sum(0), dgamma_terms, g_terms.T @ s.abs(),
                g_terms.sum(0))

    return OpDecl(
        name="train_check_network",
        signature="f(x[B, I], target[B, O], w1[H, I], b1[H], gamma[H], w2[O, H], b2[O], eps: float) -> (pred, loss)",
        inputs=(Tensor("x", "B, I", differentiable=False), Tensor("target", "B, O", differentiable=False),
                Tensor("w1", "H, I"), Tensor("b1", "H"), Tensor("gamma", "H"), Tensor("w2", "O, H"),
                Tensor("b2", "O"), Scalar("eps", (eps,), positive=True)),
        output={"pred": "B, O", "loss": ""},
        reference=reference,
        terms=terms,
        reduces=("I", "H"),
        value_kinds=("normal",),
        doc=__doc__,
    )


class Network:
    """The network op (harness.ops.derive.DeclaredOp) and its comparisons of one path."""

    def __init__(self, rmsnorm: OpDecl, eps: float) -> None:
        self.op = DeclaredOp(declaration(rmsnorm, eps))
        self.eps = eps

    def oracle(self, model: torch.nn.Module, x: torch.Tensor, target: torch.Tensor) -> dict[str, torch.Tensor]:
        """The float64 network's prediction and parameter gradients (of the mean squared error),
        with the allowance of each, at ``model``'s parameters."""
        params = dict(model.named_parameters())
        args = (x, target, *(params[n].detach() for n in PARAMETERS), self.eps)
        upstream = (torch.zeros_like(target), torch.ones((), dtype=target.dtype, device=target.device))
        grad_wrt = tuple(range(2, 2 + len(PARAMETERS)))
        return self.op.oracle(OpInputs(args=args, grad_wrt=grad_wrt, upstream=upstream, dtype=x.dtype,
                                       layout="contiguous"))

    @property
    def prediction(self) -> str:
        """The check of the predictions (the op's forward check)."""
        return self.op.forward_check

    @staticmethod
    def gradient(parameter: str) -> str:
        """The check of a parameter's gradient (``parameter``: a PARAMETERS key)."""
        return f"d{PARAMETERS[parameter]}"

    def compare(self, check: str, actual: torch.Tensor, expected: dict[str, torch.Tensor]) -> Comparison:
        """``actual`` (the predictions, or a parameter's gradient) against the float64 network's
        value of ``check`` within the ops' error model."""
        tol = self.op.tolerance(check, Case.of(self.op.name, dtype=str(actual.dtype).removeprefix("torch.")),
                                actual.dtype)
        return checks.values(actual, expected[check], actual.dtype, tol, expected[f"{check}_magnitude"])
