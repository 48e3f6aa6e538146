"""harness.mutation.campaign: outcome classification, score, kill matrix, set cover, sanity refusal (no workers)."""

import os
import pytest

from harness.mutation import campaign
from harness.mutation import mutagen
from harness.mutation.campaign import Outcome, Status
from harness.execution.jobs import Job, JobResult
from vocabulary.records import CaseRecord
from harness.registry.registry import Contract, KernelEntry
from harness.cases.command import console_words

CLI = " ".join(console_words())  # the console script that starts every repro line

CASE = "rmsnorm:M=17,N=257,dtype=float32,layout=contiguous,values=normal,eps=1e-06,seed=1"


def fake_pool(monkeypatch, outcome_of, *, announce_skips=False):
    """Stands for harness.execution.jobs.Pool in harness.mutation.session: runs the jobs one at a
    time, in order, asking ``decide`` first; ``outcome_of(job)`` -> whether the job fails. Returns
    the kernels it ran and the pools it made."""
    from harness.execution.jobs import Decision, Event
    from harness.mutation import session

    ran, pools = [], []

    class FakePool:
        def __init__(self, jobs, *, parallel, on_event=None, reuse=True, decide=None):
            self.jobs, self.on_event, self.decide = jobs, on_event, decide
            self.limits = {j.id: j.timeout for j in jobs}
            pools.append(self)

        def set_limit(self, job_id, seconds):
            self.limits[job_id] = seconds

        def limit(self, job_id):
            return self.limits[job_id]

        def run(self, *, stop=None):
            out = []
            for j in self.jobs:
                if self.decide is not None and self.decide(j) is Decision.SKIP:
                    out.append(JobResult(job=j, status="skipped", records=[], cases_run=0, seconds=0.0))
                    if announce_skips:
                        self.on_event(Event(j, "skipped", 0, 0, None))
                    continue
                ran.append(j.kernel)
                failed = outcome_of(j)
                out.append(result("ok", [record("forward", not failed)]))
                self.on_event(Event(j, "done", 1, int(failed), None))
            return out

    monkeypatch.setattr(session, "Pool", FakePool)
    return ran, pools


def run_session(entries, **kw):
    from harness.mutation.session import CampaignPlan, CampaignSession

    first_looks = kw.pop("first_looks", None)
    on_event = kw.pop("on_event", None)
    plan = CampaignPlan(tuple(entries), kw.pop("backend", "interpreter"), seed=0, max_examples=0, parallel=1, **kw)
    return CampaignSession(plan, first_looks=first_looks).run(on_event=on_event)


def entry(name: str, origin: str = "generated") -> KernelEntry:
    return KernelEntry(op="rmsnorm", name=name, fn=lambda *a: None, contract=Contract(), kind="mutant",
                       origin=origin, defined_at="here", meta={"fingerprint": "abc", "operator": "op", "diff": "-a\n+b"})


def record(check: str, passed: bool, case: str = CASE) -> CaseRecord:
    return CaseRecord(op="rmsnorm", kernel="m", check=check, case_id=case, shape=[], dtype="float32", layout="contiguous",
                      passed=passed, repro=f"python -m harness verify --op rmsnorm --select m --case {case}")


def result(status: str, records, seconds=1.0, **kw) -> JobResult:
    job = Job(op="rmsnorm", kernel="m", backend="interpreter", seed=0, max_examples=0)
    return JobResult(job=job, status=status, records=records, cases_run=len(records), seconds=seconds, **kw)


def outcome(name, status, case=CASE, check="forward"):
    by = {"check": check, "case_id": case, "repro": "r"} if status in (Status.KILLED, Status.CRASHED, Status.TIMEOUT) else None
    return Outcome(entry(name), status, by)


def test_classify_each_status():
    assert campaign.classify(entry("a"), result("ok", [record("forward", True)])).status is Status.SURVIVED
    killed = campaign.classify(entry("b"), result("ok", [record("inputs_unchanged", True), record("dx", False)]))
    assert killed.status is Status.KILLED and killed.killed_by["check"] == "dx" and killed.killed_by["case_id"] == CASE
    # the repro re-runs the mutant, which verify cannot select
    assert killed.killed_by["repro"] == (f"{CLI} mutate --op rmsnorm --select m --case "
                                         f"{CASE} --backend interpreter")
    assert campaign.classify(entry("c"), result("crashed", [record("crash", False)])).status is Status.CRASHED
    assert campaign.classify(entry("d"), result("timeout", [record("timeout", False)])).status is Status.TIMEOUT


def test_a_library_mutants_repro_names_its_modules_and_carrier():
    job = Job(op="rmsnorm", kernel="gen.lib.mod.f.add_sub_swap.1", backend="interpreter", seed=0, max_examples=0,
              plugins=("p.py",), library=("lib.mod",), carrier="lib_*")
    repro = campaign.mutant_repro(CASE, job)
    assert repro.startswith(f"{CLI} mutate --op rmsnorm --select gen.lib.mod.f.add_sub_swap.1 --case ")
    assert repro.endswith(f"--plugin {os.path.abspath('p.py')} --mutate-module lib.mod --carrier 'lib_*'")


def test_incompetence_comes_from_the_judges_word_not_from_the_failed_check():
    # the kernel process reports a refused launch with its reply; the judge puts it in the job's done event
    got = campaign.classify(entry("e"), result("ok", [record("forward", False)],
                                               incompetent="ValueError: arange's arguments must be of type tl.constexpr"))
    assert got.status is Status.INCOMPETENT and got.killed_by is None and "constexpr" in got.note


def test_score_excludes_incompetent_and_equivalent():
    outs = [outcome("k", Status.KILLED), outcome("c", Status.CRASHED), outcome("t", Status.TIMEOUT),
            outcome("s", Status.SURVIVED), outcome("i", Status.INCOMPETENT), outcome("e", Status.EQUIVALENT)]
    assert campaign.score(outs) == pytest.approx(3 / 4)
    assert campaign.score([outcome("i", Status.INCOMPETENT)]) is None
    d = outs[1].to_dict()
    assert d["detected"] is True and d["status"] == "crashed" and d["origin"] == "generated"
    assert set(d) >= {"op", "name", "origin", "operator", "location", "diff", "status", "detected", "killed_by", "seconds"}


def test_kill_matrix_and_greedy_minimal_cases():
    other = CASE.replace("M=17", "M=1")
    outs = [outcome("a", Status.KILLED), outcome("b", Status.KILLED, check="dx"), outcome("c", Status.KILLED, case=other),
            outcome("d", Status.SURVIVED)]
    assert campaign.kill_matrix(outs) == {"a": {"forward": CASE}, "b": {"dx": CASE}, "c": {"forward": other}}
    cover = campaign.minimal_cases(outs)
    assert [c["case_id"] for c in cover] == [CASE, other] and cover[0]["kills"] == ["a", "b"]


def test_sanity_refuses_when_the_clean_kernel_fails(monkeypatch):
    def fake_run_jobs(jobs, parallel, on_event=None):
        return [result("ok", [record("forward", False)]) if not j.kernel.startswith(campaign.SANITY_PREFIX)
                else result("ok", [record("forward", False)]) for j in jobs]

    monkeypatch.setattr(campaign, "run_jobs", fake_run_jobs)
    check = campaign.sanity(["rmsnorm"], backend="interpreter", seed=0, max_examples=0, plugins=(), parallel=1, modules=())
    assert not check.passed and "unmutated kernel rmsnorm/triton_rmsnorm fails its own suite" in check.reason


def test_sanity_refuses_when_the_forced_failure_passes(monkeypatch):
    import importlib

    importlib.import_module("properties.mutants.sanity")
    monkeypatch.setattr(campaign, "run_jobs", lambda jobs, parallel, on_event=None: [result("ok", [record("forward", True)]) for _ in jobs])
    check = campaign.sanity(["rmsnorm"], backend="interpreter", seed=0, max_examples=0, plugins=(), parallel=1, modules=())
    assert not check.passed and "forced failure" in check.reason and "detect nothing" in check.reason


def test_equivalent_marks_need_a_reason_and_a_matching_fingerprint(tmp_path):
    path = tmp_path / "eq.toml"
    path.write_text('[[equivalent]]\nname = "a"\nfingerprint = "abc"\nreason = ""\n')
    with pytest.raises(ValueError, match="no reason"):
        campaign.load_equivalent(path)
    path.write_text('[[equivalent]]\nname = "a"\nfingerprint = "abc"\nreason = "same function"\n'
                    '[[equivalent]]\nname = "b"\nfingerprint = "old"\nreason = "was the same"\n')
    marks = campaign.load_equivalent(path)
    assert campaign.is_marked(entry("a"), marks) and not campaign.is_marked(entry("b"), marks)
    assert campaign.load_equivalent(campaign.EQUIVALENT_FILE) is not None  # the checked-in file parses


def one_mark(tmp_path, fields: str, refused: str | None = None) -> dict:
    """Load a marks file of one mark ``a`` with ``fields`` (TOML lines); with ``refused``, expect
    the loader's ValueError matching it instead."""
    path = tmp_path / "eq.toml"
    path.write_text('[[equivalent]]\nname = "a"\nfingerprint = "abc"\nreason = "judged"\n' + fields)
    if refused is None:
        return campaign.load_equivalent(path)
    with pytest.raises(ValueError, match=refused):
        campaign.load_equivalent(path)
    return {}


def test_a_precision_mark_needs_its_measurement_and_backends(tmp_path):
    one_mark(tmp_path, 'kind = "precision"\n', refused="needs its evidence")
    one_mark(tmp_path, 'kind = "precision"\nevidence = "worst 0.7"\n', refused="needs its evidence")  # measured where?
    one_mark(tmp_path, 'kind = "close enough"\n', refused="choose from same_function, precision, out_of_reach")
    marks = one_mark(tmp_path, 'kind = "precision"\nevidence = "worst 0.7"\nbackends = ["cuda"]\n')
    assert campaign.is_marked(entry("a"), marks, "cuda") and not campaign.is_marked(entry("a"), marks, "interpreter")


def test_an_out_of_reach_mark_says_what_a_case_would_need_and_is_no_equivalence(tmp_path):
    # bug class: a real bug no case reaches excused as "equivalent" (counted out of the score as
    # if judged harmless), or listed apart on a backend where the cases do reach it
    kind = 'kind = "out_of_reach"\n'
    one_mark(tmp_path, kind + 'backends = ["cuda"]\n', refused="needs ``needs``")
    one_mark(tmp_path, kind + 'needs = "V > 2**27"\n', refused="needs ``needs``")  # out of reach where?
    marks = one_mark(tmp_path, kind + 'needs = "V > 2**27"\nbackends = ["cuda"]\n')
    assert not campaign.is_marked(entry("a"), marks, "cuda")  # never an equivalence
    assert campaign.out_of_reach(entry("a"), marks, "cuda")["needs"] == "V > 2**27"
    assert campaign.out_of_reach(entry("a"), marks, "interpreter") is None
    stale = {"a": dict(marks["a"], fingerprint="changed")}
    assert campaign.out_of_reach(entry("a"), stale, "cuda") is None  # the kernel changed: judge again


def test_every_equivalence_mark_names_a_current_mutant_with_its_current_diff():
    # bug class: a stale mark (the kernel changed) silently excusing a different mutant
    marks = campaign.load_equivalent()
    current = {}
    for module in mutagen.project_modules():
        entries = mutagen.project_entries(module)
        for m in mutagen.mutations(module):
            for e in entries:
                current[mutagen.generated_name(e, m, len(entries) > 1)] = m.fingerprint
    for name, mark in marks.items():
        assert name in current, f"{name} in equivalent.toml is not a generated mutant any more"
        assert mark["fingerprint"] == current[name], f"{name}: diff changed; judge it again and update its fingerprint"
        assert len(mark["reason"]) > 40


def test_floor_hints_put_each_mutants_own_kill_first_then_the_most_killing_cases():
    kills = {"m1": "op:a", "m2": "op:a", "m3": "op:b", "m4": "op:c"}
    hints = campaign.floor_hints(kills)
    assert hints["m3"] == ("op:b", "op:a", "op:c")  # its own case, then by kill count (ties by id)
    assert hints["m1"] == ("op:a", "op:b", "op:c")  # no duplicates
    assert hints["*"] == ("op:a", "op:b", "op:c")  # for a mutant never seen
    assert campaign.floor_hints({}) == {"*": ()}


def test_observed_kills_keep_real_cases_only(tmp_path):
    from harness.registry.registry import REGISTRY

    entry = REGISTRY.get("rmsnorm", "triton_rmsnorm")
    import dataclasses

    def outcome(name, status, case):
        return campaign.Outcome(dataclasses.replace(entry, name=name), status,
                                {"check": "forward", "case_id": case, "repro": ""} if case else None)

    outcomes = [outcome("a", campaign.Status.KILLED, "rmsnorm:M=1,N=1"), outcome("b", campaign.Status.CRASHED, "(between cases)"),
                outcome("c", campaign.Status.SURVIVED, None)]
    assert campaign.observed_kills(outcomes) == {"a": "rmsnorm:M=1,N=1"}


def test_an_outcome_names_the_gpu_that_ran_it():
    # how a campaign spread over several GPUs shows in mutation.json (mutants[].gpu)
    assert campaign.classify(entry("a"), result("ok", [record("dx", False)], gpu="1")).to_dict()["gpu"] == "1"
    assert campaign.classify(entry("b"), result("ok", [record("dx", False)])).to_dict()["gpu"] is None


def test_once_sanity_fails_the_mutants_not_yet_started_are_skipped(monkeypatch):
    # bug class: a clean kernel that fails in seconds while the pool still runs every mutant,
    # whose results are then discarded
    ran, _ = fake_pool(monkeypatch, lambda j: j.kernel.startswith(campaign.SANITY_PREFIX) or j.kernel == "triton_rmsnorm")
    campaign.load_mutants()
    entries = campaign.select("rmsnorm", "cat.*")
    check, outcomes = run_session(entries)
    assert not check.passed and "fails its own suite" in check.reason and outcomes == []
    assert not any(k.startswith("cat.") for k in ran)  # no mutant ran after the failure
    assert any(k.startswith(campaign.SANITY_PREFIX) for k in ran)  # the sanity step itself still ran whole


def test_the_sanity_rule_is_one_function_for_the_verdict_the_pool_and_the_progress_log(monkeypatch):
    # bug class: the pool, the progress log and the verdict each applying their own copy of the
    # rule, one of them wrong (a forced failure that fails counted as "sanity failed")
    from harness.execution.jobs import Event
    from harness.mutation.session import CampaignPlan, CampaignSession

    campaign.load_mutants()
    session = CampaignSession(CampaignPlan(tuple(campaign.select("rmsnorm", "cat.*")[:2]), "interpreter", 0, 0, 1))
    clean = next(j for j in session.checks if not campaign.is_forced(j))
    forced = next(j for j in session.checks if campaign.is_forced(j))
    assert clean.id == "sanity:rmsnorm:triton_rmsnorm" and forced.id == "sanity:rmsnorm:" + forced.kernel
    assert [j.id for j in session.mutant_jobs] == ["mutant:" + e.op + "/" + e.name for e in session.to_run]
    assert campaign.sanity_held(clean, failed=False) and not campaign.sanity_held(clean, failed=True)
    assert campaign.sanity_held(forced, failed=True) and not campaign.sanity_held(forced, failed=False)
    assert session.progress_class(Event(forced, "done", 1, 1, None)) == "sanity ok"
    assert session.progress_class(Event(clean, "done", 1, 1, None)) == "sanity failed"
    assert session.progress_class(Event(session.mutant_jobs[0], "done", 1, 1, None)) == "killed"
    assert session.job_count == len(session.checks) + 2


def test_a_mutants_limit_is_lowered_through_the_pool_once_its_ops_clean_run_ends(monkeypatch):
    _, pools = fake_pool(monkeypatch, lambda j: j.kernel.startswith(campaign.SANITY_PREFIX))
    campaign.load_mutants()
    entries = campaign.select("rmsnorm", "cat.*")[:2]
    check, _ = run_session(entries)
    (pool,) = pools
    assert all(j.timeout == campaign.PROVISIONAL_TIMEOUT_S for j in pool.jobs if j.id.startswith("mutant:"))  # untouched
    lowered = {pool.limit("mutant:" + e.op + "/" + e.name) for e in entries}
    assert len(lowered) == 1 and lowered.pop() < campaign.PROVISIONAL_TIMEOUT_S
    assert check.timeouts["rmsnorm"] < campaign.PROVISIONAL_TIMEOUT_S
    _, pools = fake_pool(monkeypatch, lambda j: j.kernel.startswith(campaign.SANITY_PREFIX))
    check, _ = run_session(entries, timeout=7.0)  # --timeout: the limit given, never lowered
    assert check.timeouts == {"rmsnorm": 7.0}


def test_run_jobs_skips_what_the_caller_says_without_starting_a_worker():
    from harness.execution.jobs import Decision, Job, run_jobs

    jobs = [Job(op="rmsnorm", kernel="triton_rmsnorm", backend="interpreter", seed=0, max_examples=0, plugins=(),
                case=None, stop_at_first_failure=True, timeout=60.0, extra_modules=()) for _ in range(3)]
    results = run_jobs(jobs, parallel=2, decide=lambda job: Decision.SKIP)
    assert [r.status for r in results] == ["skipped"] * 3 and all(r.pid == 0 for r in results)


class FakeLooks:
    """Stands for harness.mutation.memcheck_looks.FirstLooks: a kill for the names in ``kills``."""

    def __init__(self, entries, kills):
        self.entries = {f"{e.op}/{e.name}": e for e in entries}  # by harness.mutation.outcome.ident
        self.kills = kills
        self.asked, self.closed = [], []

    def __contains__(self, name):
        return name in self.entries

    def done(self, name):
        return True

    def outcome(self, name):
        self.asked.append(name)
        if name not in self.kills:
            return None
        return Outcome(self.entries[name], Status.KILLED, {"check": "memcheck", "case_id": self.kills[name], "repro": "r"}, 2.0)

    def close(self, *, interrupted=False):
        self.closed.append(interrupted)


def test_a_memcheck_first_look_kill_stands_for_the_suite_and_a_clean_look_runs_it(monkeypatch):
    # bug class: mutants that only memcheck kills (a masked-out read fails no case) running their
    # whole suite before the second look; the kill cache knows the case that shows them
    events = []
    ran, _ = fake_pool(monkeypatch, lambda j: j.kernel.startswith(campaign.SANITY_PREFIX), announce_skips=True)
    campaign.load_mutants()
    entries = campaign.select("rmsnorm", "cat.*")
    first, second = entries[0], entries[1]
    looks = FakeLooks([first, second], {f"rmsnorm/{first.name}": CASE})
    check, outcomes = run_session(entries, backend="cuda", first_looks=looks, on_event=events.append)
    assert check.passed
    by_name = {o.entry.name: o for o in outcomes}
    assert [o.entry.name for o in outcomes] == [e.name for e in entries]  # the report keeps the catalog's order
    assert by_name[first.name].status is Status.KILLED and by_name[first.name].killed_by["check"] == "memcheck"
    assert first.name not in ran  # its suite never ran
    assert second.name in ran and by_name[second.name].status is Status.SURVIVED  # a clean look: the usual path
    mutants_ran = [k for k in ran if k.startswith("cat.")]
    assert mutants_ran[-1] == second.name  # the looked-at mutants are queued last
    assert looks.closed == [False]
    skipped = [e for e in events if e.kind == "skipped"]
    assert [e.current for e in skipped] == ["killed by its memcheck first look"]


def test_first_looks_run_the_cached_case_and_a_broken_look_proves_nothing(monkeypatch):
    from harness.mutation import memcheck_looks
    from harness.mutation import sanitizer

    asked = []
    finding = {"errors": 2, "clean": False, "problem": "", "seconds": 3.0, "first_finding_case": CASE,
               "findings": ["========= Invalid __global__ read of size 4 bytes"]}
    clean = {"errors": 0, "clean": True, "problem": "", "seconds": 1.0, "first_finding_case": None, "findings": []}

    def fake_run_one(s, op, name, tool, **kw):
        asked.append((name, tool, kw["case"], kw["mutants"]))
        if name == "broken":
            raise OSError("compute-sanitizer vanished")
        return finding if name == "a" else clean

    monkeypatch.setattr(sanitizer, "run_one", fake_run_one)
    a, b, broken = entry("a"), entry("b"), entry("broken")
    looks = memcheck_looks.FirstLooks([(a, CASE), (b, CASE), (broken, CASE)], parallel=2, sanitizer="/x/compute-sanitizer")
    killed = looks.outcome("rmsnorm/a")  # by <op>/<name>
    assert killed.status is Status.KILLED and killed.killed_by["case_id"] == CASE
    assert killed.killed_by["repro"] == f"{CLI} sanitize --mutants --select 'a' --tools memcheck --case '{CASE}'"
    assert looks.outcome("rmsnorm/b") is None and looks.outcome("rmsnorm/broken") is None
    looks.close()
    assert sorted(asked) == sorted([(n, "memcheck", CASE, True) for n in ("a", "b", "broken")])
    assert {k: v for k, v in looks.summary().items() if k != "seconds"} == {"looked": 2, "killed": 1}
    import time

    time.sleep(0.3)  # the looks' wall time ends with the last look, not when the report asks
    assert looks.summary()["seconds"] < 0.3
    assert "rmsnorm/a" in looks and "rmsnorm/c" not in looks and "a" not in looks


def test_memcheck_kills_keep_only_memcheck_kills_with_a_real_case():
    from harness.mutation import memcheck_looks

    outcomes = [Outcome(entry("a"), Status.KILLED, {"check": "memcheck", "case_id": CASE}),
                Outcome(entry("b"), Status.KILLED, {"check": "dx", "case_id": CASE}),
                Outcome(entry("c"), Status.KILLED, {"check": "memcheck", "case_id": "(memcheck run)"}),
                Outcome(entry("d"), Status.SURVIVED)]
    assert memcheck_looks.memcheck_kills(outcomes) == {"a": CASE}


def test_the_pool_passes_over_a_job_not_decided_yet_and_records_the_skipped():
    # a mutant whose memcheck first look is still running waits in the queue; the jobs behind it
    # go ahead, and the pool keeps polling its workers meanwhile
    from harness.execution.jobs import Job, _next_job

    jobs = {k: Job(op="rmsnorm", kernel=k, backend="interpreter", seed=0, max_examples=0, plugins=(), case=None,
                   stop_at_first_failure=True, timeout=60.0, extra_modules=()) for k in "abc"}
    from harness.execution.jobs import Decision

    verdicts = {"a": Decision.WAIT, "b": Decision.SKIP, "c": Decision.RUN}
    pending = list(enumerate(jobs.values()))
    results, events = {}, []
    position = _next_job(pending, lambda job: verdicts[job.kernel], results, events.append)
    assert pending[position][1].kernel == "c"  # a waits, b is skipped, c starts
    assert [j.kernel for _, j in pending] == ["a", "c"] and results[1].status == "skipped"
    assert [(e.job.kernel, e.kind) for e in events] == [("b", "skipped")]
    pending.pop(position)
    assert _next_job(pending, lambda job: verdicts[job.kernel], results, events.append) is None  # a: not yet
    verdicts["a"] = Decision.RUN
    assert _next_job(pending, lambda job: verdicts[job.kernel], results, events.append) == 0
    assert _next_job(list(enumerate(jobs.values())), None, {}, None) == 0  # no decide: the first


def test_the_kill_cache_reader_drops_what_it_cannot_use(tmp_path, capsys):
    import json

    from harness.mutation import kill_cache

    none = tmp_path / "no_hints.json"
    path = tmp_path / "kill_cache.json"
    path.write_text(json.dumps({"format": 1, "backends": {"cuda": {"a": CASE}}, "memcheck": ["not", "a", "map"]}))
    assert kill_cache.read(path, none) == ({"format": 1, "backends": {"cuda": {"a": CASE}}}, "report dir")
    path.write_text("{not json")
    assert kill_cache.read(path, none) == ({"format": 1, "backends": {}}, "none")
    assert "unreadable kill cache" in capsys.readouterr().err
    assert kill_cache.read(None, none) == ({"format": 1, "backends": {}}, "none")


def test_a_fresh_report_dir_takes_the_committed_hints_and_never_writes_them(tmp_path):
    import json

    from harness.mutation import kill_cache

    hints = tmp_path / "kill_hints.json"
    hints.write_text(json.dumps({"format": 1, "backends": {"interpreter": {"a": CASE}}}))
    got, source = kill_cache.read(tmp_path / "out" / "kill_cache.json", hints)
    assert source == "committed hints" and got["backends"]["interpreter"] == {"a": CASE}
    assert kill_cache.read(None, hints)[1] == "none"  # --kill-cache none: no order at all
    assert kill_cache.COMMITTED.name == "kill_hints.json"


def test_first_looks_start_only_with_a_sanitizer_for_mutants_memcheck_killed(monkeypatch):
    from harness.mutation import memcheck_looks
    from harness.mutation import sanitizer

    started, told = [], []
    monkeypatch.setattr(memcheck_looks, "FirstLooks", lambda cases, **kw: started.append((cases, kw)) or "looks")
    monkeypatch.setattr(sanitizer, "available", lambda: "/x/compute-sanitizer")
    a, b = entry("a"), entry("b")
    cache = {"memcheck": {"a": CASE, "b": 7, "gone": CASE}}
    assert memcheck_looks.first_looks(cache, [a, b], parallel=8, on_start=told.append) == "looks"
    (cases, kw), = started
    assert cases == [(a, CASE)] and kw == {"parallel": 8, "sanitizer": "/x/compute-sanitizer"} and told == [1]
    assert memcheck_looks.first_looks({}, [a], parallel=8) is None
    monkeypatch.setattr(sanitizer, "available", lambda: None)
    assert memcheck_looks.first_looks(cache, [a], parallel=8) is None
    assert len(started) == 1


def test_mutants_of_one_name_in_two_ops_are_two_mutants_with_their_own_outcomes(monkeypatch):
    # bug class: names are unique per op only (cat.dgamma_mean is a mutant of rmsnorm and of
    # add_rmsnorm); a campaign keyed by name alone refused to start (two jobs of one id) or gave
    # one op's outcome to the other's mutant
    fake_pool(monkeypatch, lambda j: j.kernel.startswith(campaign.SANITY_PREFIX) or (j.op, j.kernel) == ("rmsnorm", "cat.dgamma_mean"))
    campaign.load_mutants()
    entries = campaign.select("rmsnorm", "cat.dgamma_mean") + campaign.select("add_rmsnorm", "cat.dgamma_mean")
    assert [e.op for e in entries] == ["rmsnorm", "add_rmsnorm"] and len({e.name for e in entries}) == 1
    check, outcomes = run_session(entries, ops=("rmsnorm",))
    assert [(o.entry.op, o.status) for o in outcomes] == [("rmsnorm", Status.KILLED), ("add_rmsnorm", Status.SURVIVED)]
