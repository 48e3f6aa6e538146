"""A library's own test command run against each library mutant (``mutate --tests COMMAND``).

The command runs in a shell, in the directory ``mutate`` was started from, with a bootstrap
first on ``PYTHONPATH``: a ``sitecustomize`` written to a temporary directory. In every Python
process the command starts (pytest, its xdist workers, any subprocess), it reads the mutant's
spec from the file named by ``HARNESS_LIBRARY_MUTANT`` and swaps the mutated function in as
soon as its module is imported (harness.mutation.swap, loaded by path: nothing of the harness
is imported there). Without that variable it does nothing. A ``sitecustomize`` already on the
path is run after it, so a site's own start-up code still happens.

The unmutated command must pass (``clean``), with the bootstrap in place; it runs in a thread beside
the harness's own pass over the mutants (``Scoring.start_clean``), which stops as soon as it fails,
and its verdict is awaited before any mutant is scored by the tests. The runs against the mutants
go in a thread too, beside the memcheck second look (``Scoring.start_mutants``); a run that a stop
cuts short is dropped, never counted. Then a non-zero
exit kills the mutant for the tests; a run past the time limit counts as detected, as in the
campaign (its whole process group is killed). ``sample`` picks a deterministic subset when the
tests are too slow to run against every mutant.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from harness.mutation import swap
from vocabulary import Status

TAIL_CHARS = 3000

_BOOTSTRAP = '''"""Written by the harness (mutate --tests): installs a library mutant, then the site's own sitecustomize."""
import importlib.machinery
import importlib.util
import os
import sys


def _harness_install():
    path = os.environ.get({env!r})
    if not path:
        return
    loaded = importlib.util.spec_from_file_location("_harness_library_swap", {swap_file!r})
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    module.install_on_import(module.read_spec(path))


def _site_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    paths = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    found = importlib.machinery.PathFinder.find_spec("sitecustomize", paths)
    if found is not None and found.loader is not None:
        module = importlib.util.module_from_spec(found)
        found.loader.exec_module(module)


_harness_install()
_site_sitecustomize()
'''


@dataclasses.dataclass
class TestRun:
    """One run of the test command."""

    passed: bool
    seconds: float
    timed_out: bool
    exit_status: int | None
    tail: str  # the end of what it printed

    @property
    def detected(self) -> bool:
        return not self.passed


class Bootstrap:
    """The temporary directory that holds the sitecustomize and the mutants' specs."""

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="harness-library-tests-")
        self.dir = Path(self._tmp.name)
        (self.dir / "boot").mkdir()
        text = _BOOTSTRAP.format(env=swap.SPEC_ENV, swap_file=str(Path(swap.__file__).resolve()))
        (self.dir / "boot" / "sitecustomize.py").write_text(text)

    def env(self, spec: dict | None, base: dict, *, interpreter: bool) -> dict:
        env = dict(base)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(self.dir / "boot"), base.get("PYTHONPATH", "")) if p)
        env.pop(swap.SPEC_ENV, None)
        if spec is not None:
            path = self.dir / f"{hashlib.sha1(spec['mutant'].encode()).hexdigest()[:16]}.json"
            path.write_text(json.dumps(spec))
            env[swap.SPEC_ENV] = str(path)
        if interpreter:
            env["TRITON_INTERPRET"] = "1"
        return env

    def close(self) -> None:
        self._tmp.cleanup()


def run_command(command: str, env: dict, cwd: str, timeout: float, running: list | None = None) -> TestRun:
    """The command in a shell of its own process group (a hang is killed whole); listed in
    ``running`` while it runs, so an interrupted caller can kill it."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(command, shell=True, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        if running is not None:
            running.append(proc)
        try:
            code = proc.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            _kill(proc)
            code, timed_out = None, True
        finally:
            if running is not None:
                running.remove(proc)
        out.seek(0)
        text = out.read().decode(errors="replace")
    tail = text[-TAIL_CHARS:] + (f"\n(no result after {timeout:.0f} s: killed)" if timed_out else "")
    return TestRun(code == 0, round(time.monotonic() - started, 2), timed_out, code, tail)


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def sample(names: list[str], count: int | None) -> list[str]:
    """``count`` names chosen by a stable hash (the same on every machine and run), in the
    given order; all of them when ``count`` is None or not smaller."""
    if count is None or count >= len(names):
        return list(names)
    chosen = set(sorted(names, key=lambda n: hashlib.sha1(n.encode()).hexdigest())[:count])
    return [n for n in names if n in chosen]


def run_against(specs: dict[str, dict], command: str, *, bootstrap: Bootstrap, cwd: str, timeout: float, jobs: int,
                interpreter: bool, on_done: Callable[[str, TestRun], None] | None = None,
                stop: threading.Event | None = None, running: list | None = None) -> dict[str, TestRun]:
    """The command against each mutant (name -> its swap spec), ``jobs`` at a time. On an
    interruption the commands still running are killed and none is started. ``stop`` (set from
    another thread, which kills the processes in ``running``): no command starts after it, and a
    run it cut short is dropped, never counted as a kill."""
    running = [] if running is None else running

    def one(name: str) -> TestRun | None:
        if stop is not None and stop.is_set():
            return None
        env = bootstrap.env(specs[name], os.environ, interpreter=interpreter)
        run = run_command(command, env, cwd, timeout, running)
        return None if stop is not None and stop.is_set() else run

    results: dict[str, TestRun] = {}
    pool = ThreadPoolExecutor(max(1, jobs))
    try:
        futures = {name: pool.submit(one, name) for name in specs}
        for name, future in futures.items():
            run = future.result()
            if run is None:
                continue
            results[name] = run
            if on_done is not None:
                on_done(name, run)
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in list(running):
            _kill(proc)
        raise
    pool.shutdown(wait=True)
    return results


CLEAN_TIMEOUT_S = 1800.0  # the unmutated run's limit (it sets the mutants' limit)


class Scoring:
    """The tests command scored against a campaign's mutants: the clean run first, then each
    scorable mutant (or a sample), and what mutation.json records of it."""

    def __init__(self, command: str, *, cwd: str, jobs: int, sample_size: int | None, interpreter: bool,
                 timeout: float | None, factor: float, margin: float):
        self.command, self.cwd, self.jobs, self.sample_size = command, cwd, jobs, sample_size
        self.interpreter, self.fixed_timeout, self.factor, self.margin = interpreter, timeout, factor, margin
        self.bootstrap = Bootstrap()
        self.clean: TestRun | None = None
        self.candidates: list[str] = []
        self.sampled: list[str] = []
        self.runs: dict[str, TestRun] = {}

    @property
    def clean_limit(self) -> float:
        return max(self.fixed_timeout or 0.0, CLEAN_TIMEOUT_S)

    @property
    def limit(self) -> float:
        """A mutant's limit: ``--timeout``, else factor x the clean run + margin (as the campaign)."""
        if self.fixed_timeout is not None:
            return self.fixed_timeout
        return self.factor * (self.clean.seconds if self.clean else 0.0) + self.margin

    def run_clean(self, running: list | None = None) -> TestRun:
        env = self.bootstrap.env(None, os.environ, interpreter=self.interpreter)
        self.clean = run_command(self.command, env, self.cwd, self.clean_limit, running)
        return self.clean

    def start_clean(self) -> None:
        """The clean run in a thread, beside the harness's own pass over the mutants (which does
        not depend on it): ``clean_failed`` tells the campaign to stop early, ``wait_clean``
        gives the verdict before any mutant is scored by the tests."""
        self._clean_running: list = []
        self._clean_pool = ThreadPoolExecutor(1, thread_name_prefix="clean-tests")
        self._clean_future = self._clean_pool.submit(self.run_clean, self._clean_running)

    def clean_failed(self) -> bool:
        """The clean run has ended and did not pass."""
        future = getattr(self, "_clean_future", None)
        return future is not None and future.done() and (future.exception() is not None or not future.result().passed)

    def wait_clean(self) -> TestRun:
        run = self._clean_future.result()
        self._clean_pool.shutdown(wait=True)
        return run

    def stop_clean(self) -> None:
        """An interrupted campaign does not wait for the clean run: kill it."""
        future = getattr(self, "_clean_future", None)
        if future is None:
            return
        for proc in list(self._clean_running):
            _kill(proc)
        self._clean_pool.shutdown(wait=True)
        self.clean = None  # killed, not a result: the report shows no clean run

    def run_mutants(self, outcomes) -> bool:
        """Run the command against every scorable mutant (or the sample); False if interrupted."""
        specs = {o.entry.name: o.entry.fn.spec() for o in outcomes
                 if o.status.scored and hasattr(o.entry.fn, "spec")}
        self.candidates = list(specs)
        self.sampled = sample(self.candidates, self.sample_size)
        print(f"mutate: the tests command against {len(self.sampled)} mutant(s)"
              + (f" (a sample of {len(self.candidates)})" if len(self.sampled) < len(self.candidates) else "")
              + f", {self.jobs} at a time, limit {self.limit:.0f} s each ...", flush=True)

        def done(name: str, run: TestRun) -> None:
            self.runs[name] = run
            verdict = (Status.KILLED if run.detected else Status.SURVIVED).value
            print(f"  tests: {name}: {verdict}{' (time limit)' if run.timed_out else ''} in {run.seconds:.1f} s", flush=True)

        stop = getattr(self, "_stop", None)
        try:
            run_against({n: specs[n] for n in self.sampled}, self.command, bootstrap=self.bootstrap, cwd=self.cwd,
                        timeout=self.limit, jobs=self.jobs, interpreter=self.interpreter, on_done=done,
                        stop=stop, running=getattr(self, "_mutant_running", None))
        except KeyboardInterrupt:
            return False
        finally:
            self.close()
        return not (stop is not None and stop.is_set())

    def start_mutants(self, outcomes) -> None:
        """``run_mutants`` in a thread, beside the memcheck second look (which changes no mutant's
        scorability: only survivors become kills); ``wait_mutants`` or ``stop_mutants`` ends it."""
        self._stop, self._mutant_running = threading.Event(), []
        self._mutants_pool = ThreadPoolExecutor(1, thread_name_prefix="library-tests")
        self._mutants_future = self._mutants_pool.submit(self.run_mutants, outcomes)

    def wait_mutants(self) -> bool:
        """True when every sampled mutant ran; on Ctrl-C/SIGTERM while waiting, stops the runs
        (their results are dropped) and returns False."""
        try:
            return self._mutants_future.result()
        except KeyboardInterrupt:
            self.stop_mutants()
            return False
        finally:
            self._mutants_pool.shutdown(wait=False)

    def stop_mutants(self) -> None:
        if getattr(self, "_mutants_future", None) is None:
            return
        self._stop.set()
        for proc in list(self._mutant_running):
            _kill(proc)
        try:
            self._mutants_future.result()
        except BaseException:  # noqa: BLE001 - stopping: what it raised no longer matters
            pass
        self._mutants_pool.shutdown(wait=True)

    def of(self, name: str) -> dict:
        run = self.runs.get(name)
        if run is None:
            return {"killed_by_tests": None, "tests_seconds": None}
        return {"killed_by_tests": run.detected, "tests_seconds": run.seconds,
                **({"tests_timed_out": True} if run.timed_out else {}),
                **({"tests_output_tail": run.tail[-1500:]} if run.detected else {})}

    def summary(self) -> dict:
        killed = sum(r.detected for r in self.runs.values())
        run = len(self.runs)
        sampled = len(self.sampled) < len(self.candidates)
        return {
            "command": self.command,
            "score": killed / run if run else None,
            "killed": killed,
            "survived": run - killed,
            "run": run,
            "clean_seconds": self.clean.seconds if self.clean else None,
            "timeout": round(self.limit, 1),
            "jobs": self.jobs,
            "sample": {"size": len(self.sampled), "of": len(self.candidates), "mutants": self.sampled} if sampled else None,
        }

    def close(self) -> None:
        self.bootstrap.close()
