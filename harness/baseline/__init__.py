"""Kernels of another git revision run beside the working tree's (``verify --baseline REV``)."""

from harness.baseline.drift import output_drift
from harness.baseline.load import BASE_PREFIX, load_base
from harness.baseline.worktree import checkout

__all__ = ["BASE_PREFIX", "checkout", "load_base", "output_drift"]
