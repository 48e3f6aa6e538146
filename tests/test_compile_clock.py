"""harness.run.compile_clock: Triton's JIT hooks time each compilation; hooks set before are kept.

Each test starts from a process where the clock is not installed yet (its state and Triton's
hooks are put back afterwards), so the tests hold whatever ran before them in the worker."""

import time

import pytest

from harness.run import compile_clock


@pytest.fixture
def fresh(monkeypatch):
    from triton import knobs

    monkeypatch.setattr(compile_clock, "_state", {"installed": False, "seconds": 0.0, "count": 0, "open": []})
    monkeypatch.setattr(knobs.runtime, "jit_cache_hook", None)
    monkeypatch.setattr(knobs.runtime, "jit_post_compile_hook", None)
    return knobs.runtime


def test_the_clock_adds_the_time_between_the_two_hooks_and_keeps_earlier_hooks(fresh):
    seen = []
    fresh.jit_cache_hook = lambda **kw: seen.append("pre")
    fresh.jit_post_compile_hook = lambda **kw: seen.append("post")
    assert compile_clock.install() and compile_clock.install()  # the second install chains nothing more
    assert fresh.jit_cache_hook(key="k") is None  # None: Triton goes on to compile
    time.sleep(0.05)
    fresh.jit_post_compile_hook(key="k")
    assert compile_clock.seconds() >= 0.05 and compile_clock.compiled() == 1
    assert seen == ["pre", "post"]


def test_a_compile_that_raised_leaves_no_time_behind(fresh):
    compile_clock.install()
    for _ in range(40):  # starts whose compile raised: never closed
        fresh.jit_cache_hook(key="bad")
    assert len(compile_clock._state["open"]) <= 17
    fresh.jit_cache_hook(key="good")
    fresh.jit_post_compile_hook(key="good")
    assert compile_clock.seconds() < 1.0 and compile_clock.compiled() == 1
