"""A harness command run in the background whose output a test can wait on, line by line.

Tests that interrupt a run (SIGTERM from a CI time limit, Ctrl-C) must send the signal at a known
point of the run, never after a fixed sleep: on a loaded machine a run may still be importing
torch when the sleep ends, and the test then checks an interruption it never made.
"""

from __future__ import annotations

import subprocess
import threading
import time
from typing import Callable


class Watched:
    def __init__(self, command: list[str], **popen):
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True)
        self._reader.start()

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, ready: Callable[[], bool], *, timeout: float, what: str) -> None:
        """Until ``ready()``; fails the test if the run ends first or ``timeout`` seconds pass."""
        deadline = time.monotonic() + timeout
        while not ready():
            assert self.proc.poll() is None, f"the run ended before {what}:\n{self.output[-2000:]}"
            assert time.monotonic() < deadline, f"{what} not within {timeout:.0f} s:\n{self.output[-2000:]}"
            time.sleep(0.2)

    def printed(self, prefix: str) -> bool:
        return any(line.startswith(prefix) for line in self.lines)

    def finish(self, timeout: float) -> str:
        """Wait for the run to end; its whole output."""
        self.proc.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return self.output
