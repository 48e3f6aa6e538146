"""The rich Console that prints a report's table: on a terminal, the terminal's width; in a log or
a file (CI, `> out.txt`), wide enough that no cell is squeezed, so kernel, op and mutant names are
printed whole (a name cut to "fused_linear_…" cannot be searched for or pasted)."""

from __future__ import annotations

import sys

from rich.console import Console

LOG_WIDTH = 1000  # a log has no width: the table takes what its longest row needs, never this much


def report_console(file=None, *, min_width: int) -> Console:
    out = file or sys.stdout
    probe = Console(file=out)
    width = max(min_width, probe.width) if probe.is_terminal else LOG_WIDTH
    return Console(file=out, width=width, soft_wrap=False)
