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
import threading

from harness.exits import describe_exit
from harness.orphans import die_with_parent

VERDICT_FD_ENV = "HARNESS_VERDICT_FD"
LAUNCHER_ENV = "HARNESS_LAUNCHER_PID"
NO_VERDICT = 3


def main(argv: list[str] | None = None) -> int:
    """The console entry point (``python -m harness``, ``triton-verify``)."""
    argv = sys.argv[1:] if argv is None else argv
    if VERDICT_FD_ENV in os.environ:
        return _child(argv)
    return _launch(argv)


READY = "ready"
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# held off in the child until it says it is ready: Python's own start-up cannot take them cleanly (a
# Ctrl-C while it sets up its standard streams is a "Fatal Python error", not a KeyboardInterrupt)
_HELD_AT_START = (signal.SIGINT, signal.SIGTERM)


def _child(argv: list[str]) -> int:
    fd = int(os.environ.pop(VERDICT_FD_ENV))
    launcher = os.environ.pop(LAUNCHER_ENV, "")
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if launcher.isdigit():  # a launcher killed hard (SIGKILL) stops its run as a SIGTERM would
        die_with_parent(signal.SIGTERM, parent=int(launcher))
    try:
        _say(fd, READY)  # from here on the launcher passes each signal on; one that came earlier follows now
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
    _say(fd, str(rc))
    try:
        os.close(fd)
    except OSError:
        pass
    return rc


def _say(fd: int, line: str) -> None:
    try:
        os.write(fd, f"{line}\n".encode())
    except OSError:  # no launcher is listening (the child was started by hand): nothing to vouch to
        pass


class _Relay:
    """Passes the launcher's signals on to the child once the child is ready for them; a signal
    that comes before is held and sent when the child says it is ready (never lost, never fatal)."""

    def __init__(self) -> None:
        self.child: subprocess.Popen | None = None
        self.ready = False
        self.held: list[int] = []
        self.lines: list[str] = []
        self._lock = threading.RLock()  # a second signal can land while the handler of the first holds it

    def on_signal(self, signum: int, frame) -> None:
        with self._lock:
            if self.ready and self.child is not None:
                self.child.send_signal(signum)
            elif signum not in self.held:
                self.held.append(signum)

    def listen(self, read_end: int) -> None:
        """Read the child's lines until it closes the pipe (run in a thread)."""
        with os.fdopen(read_end) as pipe:
            for line in pipe:
                self.lines.append(line.strip())
                if line.strip() == READY:
                    with self._lock:
                        self.ready = True
                        for signum in self.held:
                            self.child.send_signal(signum)
                        self.held.clear()


def _ignore_held_signals() -> None:
    for sig in _HELD_AT_START:
        signal.signal(sig, signal.SIG_IGN)


def _launch(argv: list[str]) -> int:
    read_end, write_end = os.pipe()
    env = dict(os.environ, **{VERDICT_FD_ENV: str(write_end), LAUNCHER_ENV: str(os.getpid())})
    relay = _Relay()
    handlers = {sig: signal.signal(sig, relay.on_signal) for sig in _FORWARDED}
    try:
        try:
            # a process group of its own: a terminal's Ctrl-C reaches the launcher alone, which passes
            # each signal on once (the child counts a second Ctrl-C as "stop now")
            relay.child = subprocess.Popen([sys.executable, "-m", "harness", *argv], env=env, pass_fds=(write_end,),
                                           process_group=0, preexec_fn=_ignore_held_signals)
        finally:
            os.close(write_end)
        listener = threading.Thread(target=relay.listen, args=(read_end,), daemon=True)
        listener.start()
        code = relay.child.wait()
        listener.join(timeout=10)  # a process the child left behind may hold the pipe open: never wait on it
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    said = [line for line in relay.lines if line != READY]
    return verdict(code, said[-1] if said else "")


def verdict(code: int, said: str) -> int:
    """The exit status to pass on: the child's own, if it said that status and ended with it."""
    if said.lstrip("-").isdigit() and int(said) == code:
        return code
    if said == "130" and code == -signal.SIGINT:  # it said "interrupted", then Python's exit re-raised the Ctrl-C
        return 130
    print(f"error: the harness process ended before giving a verdict (it {describe_exit(code)}): something it loaded or ran "
          f"(a plugin file, a kernel) ended the process, or the harness itself failed (a traceback above says so); "
          f"nothing it did can be trusted: exit status {NO_VERDICT}",
          file=sys.stderr)
    return NO_VERDICT
