"""The names of the checks the harness records for every op, beside the op's own value checks
(its forward output and each gradient, named by the op: ``forward``, ``dx``, ``loss``, ...).

Two kinds. What the kernel did with a case (its inputs left alone, its output's shape and dtype,
its refusals, a second run, a call without autograd, fresh and changed inputs, memory it had no
right to touch): a kernel may waive one of these by design (``Contract(waive=...)``). How the
run of a case ended, which the harness decides and no kernel may waive (``RUN_ENDS``): its
kernel process or worker lost, out of time, the run stopped, a forged event line, or the judge
itself out of GPU memory. A waiver of a run end would turn a crash into a PASS.

Enum members are compared with ``is`` inside the harness; records and reports hold their
string values (a StrEnum: ``Check.CRASH == "crash"``).
"""

from __future__ import annotations

import enum


class Check(enum.StrEnum):
    INPUTS_UNCHANGED = "inputs_unchanged"
    OUTPUT_META = "output_meta"
    CONTRACT = "contract"
    REPEATABLE = "repeatable"
    NO_GRAD = "no_grad"
    FRESH_INPUTS = "fresh_inputs"
    CHANGED_INPUT = "changed_input"
    OUT_OF_BOUNDS = "out_of_bounds"
    # how a case's run ended
    CRASH = "crash"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"
    FORGED_EVENT = "forged_event"
    OUT_OF_MEMORY = "out_of_memory"


RUN_ENDS = frozenset({Check.CRASH, Check.TIMEOUT, Check.INTERRUPTED, Check.FORGED_EVENT, Check.OUT_OF_MEMORY})
