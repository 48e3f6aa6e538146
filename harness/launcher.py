"""``python -m harness`` runs the CLI in a child process and vouches for how it ended.

Plugins and kernels are user code, and user code can end a process in ways no ``try`` sees:
``os._exit(0)`` while a plugin imports, a signal, a kernel that kills its parent. Exit status 0
from such an end would read as PASS. So the CLI runs in a child that writes its exit status to
a pipe just before it exits; the launcher passes that status on only if the child really wrote
it and really ended with it. Otherwise the run ended without a verdict: one line says so and the
exit status is 3. This module imports the standard library only, so the launcher costs a
process start, not a torch import.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

VERDICT_FD_ENV = "HARNESS_VERDICT_FD"
NO_VERDICT = 3


def main(argv: list[str] | None = None) -> int:
    """The console entry point (``python -m harness``, ``triton-verify``)."""
    argv = sys.argv[1:] if argv is None else argv
    if VERDICT_FD_ENV in os.environ:
        return _child(argv)
    return _launch(argv)


def _child(argv: list[str]) -> int:
    fd = int(os.environ.pop(VERDICT_FD_ENV))
    # the launcher passes Ctrl-C on; a shell that started it in the background left SIGINT ignored
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        from harness.cli import main as cli_main
    except KeyboardInterrupt:  # Ctrl-C while torch and triton import: one line, no traceback
        print("interrupted", file=sys.stderr)
        rc = 130
    else:
        try:
            rc = cli_main(argv)
        except SystemExit as exc:  # argparse's --help and its own exits end the CLI here
            rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if isinstance(exc.code, str):
                print(exc.code, file=sys.stderr)
    _report(fd, rc)
    return rc


def _report(fd: int, rc: int) -> None:
    try:
        os.write(fd, f"{rc}\n".encode())
        os.close(fd)
    except OSError:  # no launcher is listening (the child was started by hand): nothing to vouch to
        pass


def _launch(argv: list[str]) -> int:
    read_end, write_end = os.pipe()
    env = dict(os.environ, **{VERDICT_FD_ENV: str(write_end)})
    try:
        # a process group of its own: a terminal's Ctrl-C reaches the launcher alone, which passes
        # each signal on once (the child counts a second Ctrl-C as "stop now")
        child = subprocess.Popen([sys.executable, "-m", "harness", *argv], env=env, pass_fds=(write_end,),
                                 process_group=0)
    finally:
        os.close(write_end)
    handlers = {sig: signal.signal(sig, lambda signum, frame: child.send_signal(signum))
                for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        code = _wait(child)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    with os.fdopen(read_end) as pipe:
        said = pipe.read().strip()
    return verdict(code, said)


def verdict(code: int, said: str) -> int:
    """The exit status to pass on: the child's own, if it said that status and ended with it."""
    if said.lstrip("-").isdigit() and int(said) == code:
        return code
    if said == "130" and code == -signal.SIGINT:  # it said "interrupted", then Python's exit re-raised the Ctrl-C
        return 130
    print(f"error: the harness process ended before giving a verdict ({_how(code)}): something it loaded or ran "
          f"(a plugin file, a kernel) ended the process, or the harness itself failed (a traceback above says so); "
          f"nothing it did can be trusted: exit status {NO_VERDICT}",
          file=sys.stderr)
    return NO_VERDICT


def _wait(child: subprocess.Popen) -> int:
    while True:
        try:
            return child.wait()
        except KeyboardInterrupt:  # a signal that arrived before the handlers were in place
            child.send_signal(signal.SIGINT)


def _how(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"
