"""The mutation score, one rule for the campaign that runs the mutants and the merge that joins
a sharded campaign's parts: detected / (total - incompetent - equivalent)."""

from __future__ import annotations

from collections.abc import Iterable

from vocabulary.names import Status


def mutation_score(statuses: Iterable[Status]) -> float | None:
    """The share of scored mutants detected; None when no mutant is scored (an incompetent or
    equivalent mutant is not)."""
    scored = [s for s in statuses if s.scored]
    if not scored:
        return None
    return sum(s.detected for s in scored) / len(scored)
