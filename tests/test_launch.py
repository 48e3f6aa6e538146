"""kernels/_launch.py: the cached launch must run exactly what fn[grid] would, or take fn[grid].
Bug classes: a stale kernel reused for another specialisation (alignment, divisibility, a
constexpr), a launch hook (profiler) bypassed, the interpreter sent down the CUDA path."""

from __future__ import annotations

import pytest
from triton import knobs

import kernels._launch as L
import kernels.rmsnorm as K


class FakeKernel:
    def __init__(self, spec):
        self.spec, self.function, self.packed_metadata, self.launches = spec, f"fn{spec}", "meta", []

    def run(self, g0, g1, g2, stream, function, packed, launch_metadata, enter, exit_, *args):
        self.launches.append(((g0, g1, g2), stream, function, args))


class FakeJit:
    """What launch() reads of a JITFunction: device_caches[device][4] is the binder."""

    def __init__(self):
        self.debug, self.pre_run_hooks, self.compiled, self.indexed = False, [], [], []

        def binder(*args, **kwargs):
            bound = {f"a{i}": a for i, a in enumerate(args)} | {k: v for k, v in kwargs.items() if k.isupper()}
            spec = [("i32", "D" if a % 16 == 0 else None) for a in args] + [("constexpr", v) for k, v in kwargs.items()
                                                                             if k.isupper()]
            options = {k: v for k, v in kwargs.items() if not k.isupper()}
            return bound, spec, options

        self.device_caches = {0: ({}, {}, "target", "backend", binder)}

    def run(self, *args, grid, warmup, **kwargs):
        kernel = FakeKernel(self.device_caches[0][4](*args, **kwargs)[1])
        self.compiled.append((grid, args))
        return kernel

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.indexed.append((grid, args))


class FakeDriver:
    class active:
        get_current_device = staticmethod(lambda: 0)
        get_current_stream = staticmethod(lambda device: 1234)


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(L, "driver", FakeDriver)
    return FakeJit()


def _launches(fn):
    return [launch for kernel in getattr(fn, L._CACHE, {}).values() for launch in kernel.launches]


def test_second_call_launches_the_cached_kernel_with_the_bound_arguments(fake):
    L.launch(fake, (3,), 32, 7, BLOCK=64, num_warps=4)
    L.launch(fake, (3,), 48, 9, BLOCK=64, num_warps=4)  # same specialisation: 48 % 16 == 0, 9 not
    assert len(fake.compiled) == 1
    assert _launches(fake) == [((3, 1, 1), 1234, "fn" + str(fake.device_caches[0][4](48, 9, BLOCK=64)[1]),
                               (48, 9, 64))]


def test_another_specialisation_or_option_compiles_again(fake):
    L.launch(fake, (1,), 32, BLOCK=64, num_warps=4)
    L.launch(fake, (1,), 33, BLOCK=64, num_warps=4)  # divisibility by 16 changes
    L.launch(fake, (1,), 32, BLOCK=128, num_warps=4)  # a constexpr changes
    L.launch(fake, (1,), 32, BLOCK=64, num_warps=8)  # an option changes
    assert len(fake.compiled) == 4 and _launches(fake) == []


@pytest.mark.parametrize("hook", ["launch_enter_hook", "launch_exit_hook"])
@pytest.mark.parametrize("chain", [True, False], ids=["chain", "callable"])
def test_a_launch_hook_takes_the_standard_path(fake, monkeypatch, hook, chain):
    if chain:  # Triton >= 3.5: a HookChain, which a profiler adds to
        monkeypatch.setattr(getattr(knobs.runtime, hook), "calls", [lambda *a: None])
    else:
        monkeypatch.setattr(knobs.runtime, hook, lambda *a: None)
    L.launch(fake, (2,), 32, BLOCK=64)
    L.launch(fake, (2,), 32, BLOCK=64)
    assert fake.indexed == [((2,), (32,)), ((2,), (32,))] and not fake.compiled


def test_a_pre_run_hook_takes_the_standard_path(fake):
    fake.pre_run_hooks.append(lambda *a, **k: None)
    L.launch(fake, (2,), 32, BLOCK=64)
    assert fake.indexed and not fake.compiled


def test_unexpected_internals_take_the_standard_path(fake):
    fake.device_caches = {0: ("not", "a", "binder", "tuple")}
    L.launch(fake, (2,), 32, BLOCK=64)
    assert fake.indexed == [((2,), (32,))]


def test_the_interpreter_takes_the_standard_path():
    # under TRITON_INTERPRET=1 (the test session's setting) @triton.jit gives an InterpretedFunction
    assert not L._fast_path_possible(K._rmsnorm_forward)


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_rows_per_program_tiles_narrow_rows_and_keeps_wide_rows_alone(device):
    import torch

    dev = torch.device(device)
    for rows in (1, 2, 3, 7, 255, 257, 4096):
        for block in (1, 8, 64, 1024, 2048, 4096, 65536):
            r = L.rows_per_program(rows, block, dev)
            assert r >= 1 and r & (r - 1) == 0, (rows, block, r)  # a tile's shape: a power of two
            assert r < 2 * rows, (rows, block, r)  # never past the rows' own next power of two
            assert r == 1 or r * block <= (2048 if device == "cuda" else 4096), (rows, block, r)
    # on a GPU, a row of 2048 columns or more keeps one program per row (the measured LLM-size plan)
    assert L.rows_per_program(32768, 2048, torch.device("cuda")) == 1
    assert L.rows_per_program(32768, 4096, torch.device("cuda")) == 1
    # in the interpreter, 257 rows of 7 columns take 5 programs instead of 257
    assert -(-257 // L.rows_per_program(257, 8, torch.device("cpu"))) == 5
