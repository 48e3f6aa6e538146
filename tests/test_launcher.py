"""harness.launcher: the CLI's exit status is passed on only when the CLI itself gave it. Bug
class: user code (a plugin at import, a kernel) that ends the process with status 0, which a
caller would read as PASS."""

import json
import os
import signal
import subprocess
import sys
import time
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


def test_a_launcher_killed_hard_ends_its_run(tmp_path):
    # bug class: `timeout -s KILL` or a cancelled CI job kills the launcher only; its CLI process
    # and workers went on running kernels for nobody, holding the GPU and the report folder
    plugin, entered = tmp_path / "stuck.py", tmp_path / "entered"
    plugin.write_text("import pathlib, time\nfrom harness import register_kernel\n\n"
                      "@register_kernel('rmsnorm', name='stuck')\ndef stuck(x, gamma, eps):\n"
                      f"    pathlib.Path({str(entered)!r}).touch()\n    time.sleep(3600)\n")
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.Popen([sys.executable, "-m", "harness", "verify", "--plugin", str(plugin), "--select", "stuck",
                             "--no-render", "--jobs", "1", "--report-dir", str(tmp_path / "out")],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 240
        while not entered.exists() and time.monotonic() < deadline:  # the run is inside a case (a loaded
            time.sleep(0.2)                                           # machine starts workers slowly)
        assert entered.exists(), "the stuck kernel was never called"
        proc.kill()
        rest = proc.stdout.read()  # end of file once the CLI process and its workers are gone
    finally:
        proc.kill()
        proc.wait(timeout=60)
    # the CLI process ended as interrupted (the read above reached the end of its output: it and
    # its workers are gone); no report says PASS
    assert "interrupted" in rest, rest[-2000:]
    report = tmp_path / "out" / "verify.json"
    assert not report.exists() or json.loads(report.read_text())["passed"] is False


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
