"""What every job of one run shares, decided once and frozen: ``RunSettings``.

A verify run and a mutation campaign both build their jobs from one ``RunSettings`` (the
command's backend, seed, generated-case count, plugins, ...) and add only what is the job's own
(its kernel, time limit, shard, pairing, floor order). ``library``/``carrier``: a library
campaign (harness.mutation.library): the modules whose mutants the kernel processes register,
and the plugin kernels that run them; ``modules``: more modules every kernel process imports
(generated mutants, a --baseline run's paired kernels).
"""

from __future__ import annotations

import dataclasses

from harness.execution.job import Job

__all__ = ["RunSettings"]


@dataclasses.dataclass(frozen=True)
class RunSettings:
    backend: str
    seed: int
    max_examples: int
    plugins: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    case: str | None = None
    library: tuple[str, ...] = ()
    carrier: str = "*"
    stop_at_first_failure: bool = False

    def job(self, op: str, kernel: str, *, timeout: float, **own) -> Job:
        """A job of this run for ``op``/``kernel``; ``own``: the job's own fields (shard, baseline, ...)."""
        return Job(op=op, kernel=kernel, backend=self.backend, seed=self.seed, max_examples=self.max_examples,
                   plugins=tuple(self.plugins), case=self.case, stop_at_first_failure=self.stop_at_first_failure,
                   timeout=timeout, extra_modules=tuple(self.modules), library=tuple(self.library),
                   carrier=self.carrier, **own)
