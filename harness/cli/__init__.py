"""``python -m harness SUBCOMMAND``. Each module of this package is one subcommand.

A subcommand module defines ``NAME``, ``HELP`` (one line: what it does), ``EXAMPLE`` (one command
line), ``add_arguments(parser)`` and ``run(args) -> int``.
Exit codes: 0 success, 1 a check failed, 2 bad usage (one line on stderr, no traceback).
"""

from __future__ import annotations

import argparse
import signal
import threading
import importlib
import pkgutil
import sys

from harness.errors import HarnessError, UsageError
from reports.manifest import ForeignFileError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's own usage errors: one line, exit 2
        raise UsageError(f"{self.prog}: {message}")


def _subcommands() -> list:
    pkg = importlib.import_module(__name__)
    mods = [importlib.import_module(f"{__name__}.{m.name}") for m in pkgutil.iter_modules(pkg.__path__)]
    return sorted((m for m in mods if hasattr(m, "NAME")), key=lambda m: m.NAME)


DESCRIPTION = "Verify Triton kernels against float64 oracles, case by case, and score the checks by mutation."
EXAMPLE = "python -m harness verify --plugin my_kernels.py --select 'my_*' --backend interpreter"


def _epilog(example: str) -> str:
    return f"example:\n  {example}"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m harness", description=DESCRIPTION, epilog=_epilog(EXAMPLE),
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for mod in _subcommands():
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP, epilog=_epilog(mod.EXAMPLE),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def _terminate(signum, frame):
    raise KeyboardInterrupt  # a CI time limit (SIGTERM) stops a run the way Ctrl-C does: reports are still written


def main(argv: list[str] | None = None) -> int:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)
    try:
        args = build_parser().parse_args(argv)
        if not getattr(args, "_run", None):
            raise UsageError("python -m harness: choose a command (verify, mutate, ...); see --help")
        from harness.cli import common

        common.settle_report_dir(args)
        if getattr(args, "report_dir", None) is None or getattr(args, "driver", None):
            return args._run(args)  # no report directory (or sanitize's child, inside its parent's run)
        from harness.cli import outdir

        with outdir.session(args, args.command):  # writable and locked before any work
            return args._run(args)
    except (HarnessError, ForeignFileError) as exc:  # ForeignFileError: a user's file under a report's name, never overwritten
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
