"""Mutants under compute-sanitizer memcheck, on a GPU: what the properties cannot see there.

An out-of-bounds read whose values are masked out later, or a store past the end of a buffer
nobody reads, changes no output on a GPU, so the properties pass; the interpreter's guard
(harness.run.oob) kills such mutants on the CPU. Memcheck sees them on the GPU, two ways:

- the second look (``second_look``): after the campaign, each survivor runs a few floor cases
  under memcheck; a memory error there is a kill by the check ``memcheck``.
- the first look (``FirstLooks``): a mutant the last campaign killed by memcheck (the kill
  cache keeps the case) runs that one case under memcheck at once, beside the campaign's pool,
  instead of first running its whole property suite (every case, since a masked-out access
  fails none) and only then its second look. A finding kills it; a clean look (the kernel or
  the case changed) sends it through the suite and the second look as usual. Only the order
  of the work changes, never what can kill a mutant.
"""

from __future__ import annotations

import shlex
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable

from harness.cases.command import console_words
from harness.mutation import sanitizer as sanitizers
from harness.mutation.outcome import Outcome, Status, ident
from harness.registry.registry import KernelEntry

MEMCHECK_CASES = 8
MEMCHECK_TIMEOUT_S = 300.0


def _killed_by(name: str, r: dict, repro_args: str, driver_args: tuple[str, ...] = ()) -> dict:
    more = "".join(f" {shlex.quote(a)}" for a in driver_args)
    return {
        "check": "memcheck",
        "case_id": r["first_finding_case"] or "(memcheck run)",
        "repro": f"{shlex.join(console_words())} sanitize --mutants --select '{name}' --tools memcheck {repro_args}{more}",
        "message": "; ".join(r["findings"][:3]) or f"{r['errors']} memcheck errors",
    }


def memcheck_kills(outcomes: list[Outcome]) -> dict[str, str]:
    """mutant -> the case in which memcheck killed it, for the next campaign's first looks."""
    return {o.entry.name: o.killed_by["case_id"] for o in outcomes
            if o.status.detected and o.killed_by and o.killed_by["check"] == "memcheck" and ":" in o.killed_by["case_id"]}


def second_look(outcomes: list[Outcome], *, parallel: int, on_done: Callable[[Outcome], None] | None = None,
                driver_args: tuple[str, ...] = ()) -> dict:
    """Each survivor under memcheck: MEMCHECK_CASES spread over the floor, then more for the
    shapes and parameter values those miss (an edge such as V = 1 with every row ignored is
    where a masked-out read past the end shows). Turns survivors with findings into kills by
    ``memcheck``, with the case and a repro; returns what was done, for the report.
    ``driver_args``: what the driver needs to find the mutants (a library campaign's plugins
    and modules)."""
    survivors = [o for o in outcomes if o.status is Status.SURVIVED]
    sanitizer = sanitizers.available()
    if not survivors or sanitizer is None:
        for o in survivors:
            o.note = "compute-sanitizer not available: no memcheck second look"
        return {"available": sanitizer is not None, "checked": 0, "killed": 0}

    running: list = []

    def look(o: Outcome) -> dict:
        return sanitizers.run_one(sanitizer, o.entry.op, o.entry.name, "memcheck", cases=MEMCHECK_CASES,
                                  timeout=MEMCHECK_TIMEOUT_S, mutants=True, running=running, cover=True,
                                  driver_args=driver_args)

    killed, looked = 0, 0
    pool = ThreadPoolExecutor(max(1, parallel))
    try:
        for o, r in zip(survivors, pool.map(look, survivors)):
            looked += 1
            o.seconds += r["seconds"]
            if r["errors"]:
                killed += 1
                o.status = Status.KILLED
                o.killed_by = _killed_by(o.entry.name, r, "--cover", driver_args)
            else:
                o.note = f"memcheck second look: {'clean' if r['clean'] else r['problem']}"
            if on_done:
                on_done(o)
    except KeyboardInterrupt:  # stopped (Ctrl-C, SIGTERM): kill the sanitizer runs, keep what was seen
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in list(running):
            sanitizers.kill(proc)
        for o in survivors[looked:]:
            o.note = "memcheck second look interrupted before this mutant"
        return {"available": True, "checked": looked, "killed": killed, "interrupted": True}
    pool.shutdown(wait=True)
    return {"available": True, "checked": len(survivors), "killed": killed}


def first_looks(cache: dict, runnable: list[KernelEntry], *, parallel: int, driver_args: tuple[str, ...] = (),
                on_start: Callable[[int], None] | None = None) -> FirstLooks | None:
    """The first looks at the mutants of ``runnable`` the last campaign killed by memcheck (the
    kill cache's ``memcheck`` part), started now; None when there are none or no sanitizer.
    ``on_start``: told how many looks start, before they do."""
    known = cache.get("memcheck", {})
    cases = [(e, known[e.name]) for e in runnable if isinstance(known.get(e.name), str)]
    path = sanitizers.available() if cases else None
    if path is None:
        return None
    if on_start is not None:
        on_start(len(cases))
    more = {"driver_args": driver_args} if driver_args else {}
    return FirstLooks(cases, parallel=max(1, parallel), sanitizer=path, **more)


def second_look_of(outcomes: list[Outcome], header: dict, *, parallel: int, driver_args: tuple[str, ...] = (),
                   on_start: Callable[[int], None] | None = None,
                   on_done: Callable[[Outcome], None] | None = None) -> str | None:
    """A campaign's second look (nothing without survivors): mutation.json's ``memcheck`` in
    ``header``; if it was interrupted, the header says so and this returns why the score is no
    verdict. ``on_start``: told how many survivors it looks at, before it does."""
    survivors = sum(o.status is Status.SURVIVED for o in outcomes)
    if not survivors:
        return None
    if on_start is not None:
        on_start(survivors)
    looked_from = time.monotonic()
    header["memcheck"] = second_look(outcomes, parallel=parallel, driver_args=driver_args, on_done=on_done)
    header["memcheck"]["seconds"] = round(time.monotonic() - looked_from, 1)
    if header["memcheck"].get("interrupted"):
        header.update(interrupted=True, not_run=[])
        return (f"interrupted during the memcheck second look ({header['memcheck']['checked']} of {survivors} "
                "survivors looked at): the score is not a verdict")
    return None


class FirstLooks:
    """Memcheck at once, on the case that killed each of these mutants last time (see the module).

    Starts every look on construction, in ``parallel`` threads (each a compute-sanitizer
    process); ``outcome`` waits for one and returns the kill, or None when the look was clean
    or failed (the mutant then takes the usual path). ``close`` ends the looks: on an
    interruption it kills the sanitizer processes still running."""

    def __init__(self, cases: list[tuple[KernelEntry, str]], *, parallel: int, sanitizer: str,
                 driver_args: tuple[str, ...] = ()):
        self.driver_args = driver_args
        self.entries = {ident(e): e for e, _ in cases}  # by <op>/<name>: names are unique per op only
        self.cases = {ident(e): case for e, case in cases}
        self.running: list = []
        self.started = time.monotonic()
        self.last_ended: float | None = None  # when the last look to end ended: the looks' own wall time
        self.pool = ThreadPoolExecutor(max(1, min(parallel, len(cases))))
        self.futures: dict[str, Future] = {
            ident(e): self.pool.submit(sanitizers.run_one, sanitizer, e.op, e.name, "memcheck", cases=1, case=case,
                                     timeout=MEMCHECK_TIMEOUT_S, mutants=True, running=self.running,
                                     driver_args=driver_args)
            for e, case in cases
        }
        for future in self.futures.values():
            future.add_done_callback(self._ended)

    def _ended(self, _future: Future) -> None:
        self.last_ended = time.monotonic()

    def __contains__(self, name: str) -> bool:
        return name in self.futures

    def done(self, name: str) -> bool:
        return self.futures[name].done()

    def outcome(self, name: str) -> Outcome | None:
        """The kill found by this mutant's look (waiting for the look to end), or None."""
        try:
            r = self.futures[name].result()
        except Exception:  # noqa: BLE001 - a look that broke proves nothing: the usual path decides
            return None
        if not r["errors"]:
            return None
        return Outcome(self.entries[name], Status.KILLED, _killed_by(self.entries[name].name, r, f"--case '{self.cases[name]}'", self.driver_args),
                       r["seconds"], "memcheck first look: the case that killed it in the last campaign")

    def close(self, *, interrupted: bool = False) -> None:
        if interrupted:
            self.pool.shutdown(wait=False, cancel_futures=True)
            for proc in list(self.running):
                sanitizers.kill(proc)
        else:
            self.pool.shutdown(wait=True)

    def summary(self) -> dict:
        """For the report: how many looked, how many killed, and the looks' own wall time (from
        their start to the end of the last one, not to the end of the campaign)."""
        done = [f.result() for f in self.futures.values() if f.done() and not f.cancelled() and f.exception() is None]
        return {"looked": len(done), "killed": sum(bool(r["errors"]) for r in done),
                "seconds": round((self.last_ended or time.monotonic()) - self.started, 1)}
