"""Imported by the kernel process (``Job.extra_modules``): the base kernels of ROOT_ENV."""

import os

from harness.baseline.load import ROOT_ENV, load_base_kernels

if os.environ.get(ROOT_ENV):
    load_base_kernels(os.environ[ROOT_ENV])
