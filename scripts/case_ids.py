"""Every floor case id of some ops, the first generated ones and a digest of each listed case's
inputs and oracle: compare two commits' output to show that a refactoring of the op engine keeps
every case (``python scripts/case_ids.py attention rmsnorm > before.json``).

The generated cases are drawn as ``verify`` draws them (the op's strategy under a fixed hypothesis
seed, generation only). The digest covers the first ``--digest`` cases of each list on the CPU."""

from __future__ import annotations

import argparse
import hashlib
import json

import torch

from harness.cases.drawing import drawn_cases
from harness.registry.registry import REGISTRY


def generated_ids(spec, backend: str, n: int, at_seed: int) -> list:
    return drawn_cases(spec, backend=backend, seed=at_seed, max_examples=n)


def digest(spec, case) -> str:
    h = hashlib.sha1()
    inputs = spec.make_inputs(case, "cpu")
    values = [*inputs.args, *(inputs.upstream if isinstance(inputs.upstream, tuple) else (inputs.upstream,))]
    oracle = spec.oracle(inputs)
    values += [oracle[k] for k in sorted(oracle)]
    for v in values:
        if isinstance(v, torch.Tensor):
            h.update(str((tuple(v.shape), v.dtype, v.stride())).encode())
            t = v.detach().to("cpu").contiguous()
            h.update((t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes())
        else:
            h.update(repr(v).encode())
    h.update(repr([(c, str(spec.tolerance(c, case, inputs.dtype))) for c in spec.value_checks()]).encode())
    return h.hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ops", nargs="+")
    parser.add_argument("--generated", type=int, default=30)
    parser.add_argument("--digest", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(0)
    out = {}
    for name in args.ops:
        spec = REGISTRY.op(name)
        for backend in ("interpreter", "cuda"):
            floor = list(spec.floor_cases(backend=backend))
            drawn = generated_ids(spec, backend, args.generated, args.seed)
            out[f"{name}/{backend}/floor"] = [c.id for c in floor]
            out[f"{name}/{backend}/generated"] = [c.id for c in drawn]
            if backend == "interpreter":
                out[f"{name}/{backend}/digests"] = [digest(spec, c) for c in floor[: args.digest] + drawn[: args.digest]]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
