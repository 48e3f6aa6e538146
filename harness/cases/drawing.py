"""How the generated cases are drawn: one set of hypothesis settings for every place that draws
them (a suite, the pytest plugin's collection, scripts/case_ids.py), and draws that depend on the
op, the backend and the seed only.

Hypothesis mixes into its draws constants it reads from every "local" module already imported
(``hypothesis.internal.conjecture.providers._get_local_constants``: the integers and floats in the
source of any module outside site-packages and the standard library). In a worker that verified
softmax before matmul, matmul drew other shapes than in one that did not, so a case id depended on
what ran earlier in the process. ``op_constants_only`` gives hypothesis an empty local pool while a
suite draws (its built-in constants stay): the same seed draws the same cases in any process."""

from __future__ import annotations

from contextlib import contextmanager

from hypothesis import HealthCheck, Phase, given, seed as hypothesis_seed, settings


def draw_settings(max_examples: int, *, shrink: bool = False, **more) -> settings:
    phases = (Phase.generate, Phase.shrink) if shrink else (Phase.generate,)
    return settings(max_examples=max_examples, deadline=None, database=None, derandomize=False, print_blob=False,
                    suppress_health_check=list(HealthCheck), phases=phases, **more)


@contextmanager
def op_constants_only():
    """Hypothesis's pool of constants from local modules left empty while the block runs."""
    try:
        from hypothesis.internal.conjecture import providers
        empty = providers.Constants()
        original = providers._get_local_constants
    except (ImportError, AttributeError):  # a hypothesis without the pool: nothing to hold still
        yield
        return
    providers._get_local_constants = lambda: empty
    providers.CONSTANTS_CACHE.cache.clear()  # permitted constants cached from the full pool
    try:
        yield
    finally:
        providers._get_local_constants = original
        providers.CONSTANTS_CACHE.cache.clear()


def drawn_cases(spec, *, backend: str, seed: int, max_examples: int) -> list:
    """The generated cases of ``spec`` in the order a suite draws them, without running anything."""
    drawn = []

    @hypothesis_seed(seed)
    @draw_settings(max_examples)
    @given(spec.case_strategy(backend=backend))
    def draw(case):
        drawn.append(case)

    with op_constants_only():
        draw()
    return drawn
