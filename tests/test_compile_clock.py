"""harness.run.compile_clock: Triton's JIT hooks time each compilation; hooks set before are kept."""

import time

from harness.run import compile_clock


def test_the_clock_adds_the_time_between_the_two_hooks_and_keeps_earlier_hooks():
    from triton import knobs

    seen = []
    knobs.runtime.jit_cache_hook = None if compile_clock._state["installed"] else (lambda **kw: seen.append("pre"))
    knobs.runtime.jit_post_compile_hook = None if compile_clock._state["installed"] else (lambda **kw: seen.append("post"))
    chained = not compile_clock._state["installed"]
    assert compile_clock.install()
    before, count = compile_clock.seconds(), compile_clock.compiled()
    assert knobs.runtime.jit_cache_hook(key="k") is None  # None: Triton goes on to compile
    time.sleep(0.05)
    knobs.runtime.jit_post_compile_hook(key="k")
    assert compile_clock.seconds() - before >= 0.05 and compile_clock.compiled() == count + 1
    if chained:
        assert seen == ["pre", "post"]


def test_a_compile_that_raised_leaves_no_time_behind():
    from triton import knobs

    compile_clock.install()
    before = compile_clock.seconds()
    for _ in range(40):  # starts whose compile raised: never closed
        knobs.runtime.jit_cache_hook(key="bad")
    assert len(compile_clock._state["open"]) <= 17
    knobs.runtime.jit_cache_hook(key="good")
    knobs.runtime.jit_post_compile_hook(key="good")
    assert compile_clock.seconds() - before < 1.0
