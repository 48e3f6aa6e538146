"""``Contract(inplace={output: buffer})``: the names a declaration may use, checked against the op.

An output is the forward's (``y``, the output named in the op's signature, or its forward check,
e.g. ``forward``, ``loss``) or a gradient (the op's gradient checks: ``dx``, ``dgamma``); a buffer
is a tensor input of the op's signature (``x``, ``gamma``; ``arg<i>`` by position where the
signature names none), or the upstream gradient (``dy``, ``upstream``), which only a gradient
may be written into. :func:`writes` resolves a checked declaration for the runner.
"""

from __future__ import annotations

import dataclasses
import re

from harness.errors import RegistryError

FORWARD = "forward"  # the marker of the forward output in a resolved write
UPSTREAM = ("dy", "upstream")
_ARG = re.compile(r"arg(\d+)$")


@dataclasses.dataclass(frozen=True)
class Write:
    """One declared in-place write: ``output`` (FORWARD or a gradient check) into ``buffer``, the
    name declared, at ``position`` in the kernel's arguments (None: the upstream gradient)."""

    output: str
    buffer: str
    position: int | None

    @property
    def label(self) -> str:
        return "arg" + str(self.position) if self.position is not None else "upstream"


def signature_names(signature: str) -> tuple[list[tuple[str, bool]], str | None]:
    """([(input name, is a tensor)], the output's name or None) of ``f(x[M, N], eps: float) -> y[M, N]``."""
    head, _, tail = signature.partition("->")
    inner = head[head.find("(") + 1:head.rfind(")")] if "(" in head else ""
    inputs, depth, part = [], 0, ""
    for ch in inner + ",":
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            m = re.match(r"\s*([A-Za-z_]\w*)\s*(\[)?", part)
            if m:
                inputs.append((m.group(1), m.group(2) is not None))
            part = ""
        else:
            part += ch
    out = re.match(r"\s*([A-Za-z_]\w*)\s*\[", tail)
    return inputs, out.group(1) if out else None


def _forward_names(spec) -> list[str]:
    _, out = signature_names(getattr(spec, "signature", "") or "")
    return list(dict.fromkeys(n for n in ("y", out, spec.forward_check) if n))


def _buffer_position(spec, buffer: str) -> tuple[int | None, str | None]:
    """(the buffer's position, why it is not a buffer of this op)."""
    inputs, _ = signature_names(getattr(spec, "signature", "") or "")
    names = [n for n, _ in inputs]
    if buffer in names:
        if not inputs[names.index(buffer)][1]:
            return None, f"{buffer!r} is not a tensor input"
        return names.index(buffer), None
    m = _ARG.match(buffer)
    if m and not inputs:
        return int(m.group(1)), None
    known = [n for n, tensor in inputs if tensor] or ["arg0", "arg1", "..."]
    return None, f"unknown input {buffer!r}; known buffers: {', '.join(known + list(UPSTREAM))}"


def validate(entry, spec) -> None:
    """RegistryError naming the known names where ``entry.contract.inplace`` does not fit ``spec``."""
    contract = entry.contract
    if not contract.inplace:
        return
    where = f"{entry.kind} {entry.name!r} ({entry.defined_at}): Contract(inplace=...)"
    forward, grads = _forward_names(spec), list(spec.grad_checks)
    targets: dict[str, str] = {}
    for output, buffer in contract.inplace.items():
        if output not in forward and output not in grads:
            raise RegistryError(f"{where} names unknown output {output!r} of op {spec.name!r}; known outputs: "
                                f"{', '.join(forward + grads)}")
        if output in grads and contract.forward_only:
            raise RegistryError(f"{where} writes the gradient {output!r}, but Contract(forward_only=True) asks for "
                                "no gradient")
        if buffer in UPSTREAM:
            if output in forward:
                raise RegistryError(f"{where}: the forward output {output!r} cannot be written into the upstream "
                                    f"gradient {buffer!r}, which exists only in the backward; name a tensor input")
        else:
            _, why = _buffer_position(spec, buffer)
            if why:
                raise RegistryError(f"{where} writes {output!r} into {why}")
        key = "upstream" if buffer in UPSTREAM else buffer
        if key in targets:
            raise RegistryError(f"{where} writes both {targets[key]!r} and {output!r} into {buffer!r}")
        targets[key] = output
    if sum(o in forward for o in contract.inplace) > 1:
        raise RegistryError(f"{where} names the forward output twice: {', '.join(o for o in contract.inplace if o in forward)}")


def writes(contract, spec) -> list[Write]:
    """The checked declaration, resolved: the forward's write first, then the gradients'."""
    forward = _forward_names(spec)
    out = []
    for output, buffer in contract.inplace.items():
        position = None if buffer in UPSTREAM else _buffer_position(spec, buffer)[0]
        out.append(Write(FORWARD if output in forward else output, buffer, position))
    return sorted(out, key=lambda w: w.output != FORWARD)
