"""harness.launcher: the CLI's exit status is passed on only when the CLI itself gave it. Bug
class: user code (a plugin at import, a kernel) that ends the process with status 0, which a
caller would read as PASS."""

import signal
import os
import subprocess
import sys
from pathlib import Path

from harness import launcher

ROOT = Path(__file__).resolve().parent.parent


def _run(*args, tmp_path):
    env = dict(os.environ, TRITON_INTERPRET="1")
    return subprocess.run([sys.executable, "-m", "harness", *args, "--report-dir", str(tmp_path / "out")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_a_plugin_that_exits_with_status_0_at_import_is_no_verdict(tmp_path):
    done = _run("verify", "--plugin", "tests/fixtures/misbehaving/exits_at_import.py", tmp_path=tmp_path)
    assert done.returncode == launcher.NO_VERDICT, done.stderr
    assert "ended before giving a verdict (it exited with status 0)" in done.stderr
    assert not (tmp_path / "out" / "verify.json").exists()


def test_the_cli_own_exit_status_is_passed_on(tmp_path):
    done = _run("verify", "--select", "no_such_kernel", tmp_path=tmp_path)
    assert done.returncode == 2 and "matches no kernel" in done.stderr
    assert "before giving a verdict" not in done.stderr


def test_only_a_status_the_child_both_said_and_ended_with_is_passed_on(capsys):
    assert launcher.verdict(1, "1") == 1 and launcher.verdict(0, "0") == 0
    assert launcher.verdict(1, "0") == launcher.NO_VERDICT  # it claimed a pass, then ended otherwise
    assert launcher.verdict(0, "") == launcher.NO_VERDICT  # os._exit(0) before it could say anything
    assert launcher.verdict(-9, "") == launcher.NO_VERDICT
    assert launcher.verdict(-signal.SIGINT, "130") == 130  # interrupted, said so, and the exit re-raised the Ctrl-C
    assert launcher.verdict(-signal.SIGINT, "0") == launcher.NO_VERDICT
    assert "killed by SIGKILL" in capsys.readouterr().err
