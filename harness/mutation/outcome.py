"""What happened to one mutant: its Status (one Enum, end to end) and its Outcome record."""

from __future__ import annotations

import dataclasses

from harness.registry.registry import Origin, KernelEntry
from vocabulary import Status
from vocabulary.records import MutantRecord

SANITY_PREFIX = "sanity.forced_failure."  # the forced failures of the sanity step (never scored)


def ident(entry) -> str:
    """A mutant's identity within a campaign, ``<op>/<name>``: names are unique per op only (a catalog
    mutant such as ``cat.row_offset_int32`` exists for every op, a shared jit helper's generated
    mutants for each op that calls it), and each is a mutant of its own with its own outcome."""
    return f"{entry.op}/{entry.name}"


@dataclasses.dataclass
class Outcome:
    entry: KernelEntry
    status: Status
    killed_by: dict | None = None  # {check, case_id, repro}
    seconds: float = 0.0
    note: str = ""  # incompetence reason, equivalence reason, crash message
    gpu: str | None = None  # the GPU (CUDA_VISIBLE_DEVICES) of the worker that ran it
    reused_from: str | None = None  # saved_at of the reused outcome (harness.incremental), not run now
    specializations: tuple[str, ...] = ()  # the Triton keys its run launched (harness.run.specializations)

    def to_dict(self) -> dict:
        """Its entry in mutation.json (vocabulary.records.MutantRecord)."""
        e = self.entry
        library = {"module": e.meta["module"], "function": e.meta.get("function"), "kernel": e.meta.get("kernel"),
                   "fingerprint": e.meta.get("fingerprint")} if "module" in e.meta else {}
        return MutantRecord(
            op=e.op, name=e.name, origin=e.origin,
            operator=e.meta.get("operator", "plugin" if e.origin is Origin.PLUGIN else None),
            location=e.meta.get("location", e.defined_at), diff=e.meta.get("diff", ""), description=e.description,
            status=self.status, detected=self.status.detected, killed_by=self.killed_by,
            seconds=round(self.seconds, 3), note=self.note, gpu=self.gpu, specializations=len(self.specializations),
            reused_from=self.reused_from, **library,
        ).to_json()
