"""harness.exits: how a process ended, in words, and how a helper process ends once its work is
handed over.

Bug classes: a helper process (the catalog child, the judge, the kernel process) whose parent
waits for torch's teardown after the work is done (about 0.4 CPU-s each, on a one-case repro's
path); a quick end that loses the output still buffered, or the exit status."""

import subprocess
import sys
from pathlib import Path

from harness.exits import describe_exit

ROOT = Path(__file__).resolve().parent.parent


def test_end_now_flushes_the_output_keeps_the_status_and_skips_the_teardown():
    code = ("import atexit, sys; from harness.exits import end_now; "
            "atexit.register(lambda: print('teardown ran')); "
            "sys.stdout.write('reply'); sys.stderr.write('plugin said'); end_now(3)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 3
    assert done.stdout == "reply" and done.stderr == "plugin said"  # buffered, yet written; no teardown


def test_describe_exit_names_the_signal_or_the_status():
    assert describe_exit(-9) == "was killed by SIGKILL"
    assert describe_exit(2) == "exited with status 2"
    assert describe_exit(None) == "stopped answering"
