"""Imported by the kernel process (``Job.extra_modules``): the base kernels of SOURCES_ENV."""

import os

from harness.baseline.load import SOURCES_ENV, load_base, sources_from_env

if os.environ.get(SOURCES_ENV):
    load_base(sources_from_env(os.environ[SOURCES_ENV]))
