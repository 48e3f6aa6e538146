"""The header every report carries: backend, device, versions, seed, command."""

from __future__ import annotations

import datetime
import shlex
import sys


def header(backend_description: dict, *, seed: int | None) -> dict:
    return {
        **backend_description,
        "seed": seed,
        "command": shlex.join(["python", "-m", "harness", *sys.argv[1:]]),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
