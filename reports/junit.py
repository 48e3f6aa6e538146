"""``junit.xml``: one test case per kernel x check (and one per mutant), for any CI system.

A failing test case carries the first failing cases' ids, messages and repro commands.
Follows the common JUnit schema (testsuites > testsuite > testcase > failure|error|skipped)
that Jenkins, GitLab, GitHub test reporters and pytest's own junitxml use.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import defaultdict

from reports import verify_report
from vocabulary import JobStatus, Status, Verdict
from vocabulary.records import kernel_summaries

__all__ = ["render", "CASES_PER_FAILURE"]

CASES_PER_FAILURE = 5
# XML 1.0 forbids most control characters even when escaped; a kernel's message may hold any.
_INVALID_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _clean(text) -> str:
    return _INVALID_XML.sub("?", "" if text is None else str(text))


def _element(parent, tag: str, **attrs) -> ET.Element:
    return ET.SubElement(parent, tag, {k: _clean(v) for k, v in attrs.items() if v is not None})


def _suite(root: ET.Element, name: str, header: dict, timestamp: str | None) -> ET.Element:
    # the Ant/Jenkins schema wants a timestamp without a zone: created is UTC
    suite = _element(root, "testsuite", name=name, timestamp=timestamp[:19] if timestamp else None)
    props = _element(suite, "properties")
    for key in ("backend", "device", "seed", "command"):
        if header.get(key) is not None:
            _element(props, "property", name=key, value=header[key])
    for key, value in (header.get("versions") or {}).items():
        _element(props, "property", name=f"version.{key}", value="-" if value is None else value)
    return suite


def _finish(suite: ET.Element) -> tuple[int, int, int, int, float]:
    cases = suite.findall("testcase")
    counts = (
        len(cases),
        sum(1 for c in cases if c.find("failure") is not None),
        sum(1 for c in cases if c.find("error") is not None),
        sum(1 for c in cases if c.find("skipped") is not None),
        sum(float(c.get("time", 0)) for c in cases),
    )
    for key, value in zip(("tests", "failures", "errors", "skipped"), counts):
        suite.set(key, str(value))
    suite.set("time", f"{counts[4]:.3f}")
    return counts


def _failure_text(records: list[dict]) -> str:
    parts = []
    for r in records[:CASES_PER_FAILURE]:
        parts.append(f"case: {r.get('case_id')}\n{r.get('message') or '(no message)'}\nrepro: {r.get('repro') or '-'}")
    if len(records) > CASES_PER_FAILURE:
        parts.append(f"... and {len(records) - CASES_PER_FAILURE} more failed cases (see verify.json / index.html)")
    return "\n\n".join(parts)


def _verify_suites(root: ET.Element, verify: dict) -> None:
    by_kernel_check: dict[tuple[str, str], dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in verify.get("cases", []):
        by_kernel_check[(r.get("op"), r.get("kernel"))][r.get("check")].append(r)
    for k in kernel_summaries(verify):
        op, name = k.get("op"), k.get("name")
        suite = _suite(root, f"verify.{op}.{name}", verify, verify.get("created"))
        _element(suite.find("properties"), "property", name="verdict", value=verify_report.verdict_label(k))
        if k.get("failure_class"):
            _element(suite.find("properties"), "property", name="failure_class", value=k["failure_class"])
        if k.get("forward_only"):  # Contract(forward_only=True): no gradient was asked of it
            _element(suite.find("properties"), "property", name="forward_only", value="true")
        if k.get("refused"):  # clean refusals of in-contract cases: failures, and the declaration that accepts them
            _element(suite.find("properties"), "property", name="refused", value=verify_report.refusal_line(k))
        limited = k.get("self_limited")
        if limited:  # Contract(self_limits=True): in-contract cases the kernel rejected itself, not verified there
            _element(suite.find("properties"), "property", name="self_limited", value=str(limited["cases"]))
            case = _element(suite, "testcase", classname=f"verify.{op}.{name}", name="self_limited", time="0")
            counts = lambda d: ", ".join(f"{n} ({c})" for n, c in d.items())  # noqa: E731
            _element(case, "skipped", message=_clean(
                f"{limited['cases']} case(s) rejected by the kernel itself (Contract(self_limits=True)), not verified "
                f"there: layouts {counts(limited['layouts'])}; dtypes {counts(limited['dtypes'])}; said: "
                f"{'; '.join(limited['reasons'])}"))
            _element(case, "system-out").text = _clean("\n".join(f"rejected {i}" for i in limited["case_ids"]))
        checks = by_kernel_check.get((op, name), {})
        for check in sorted(set(checks) | set(k.get("checks") or {})):
            records = checks.get(check, [])
            seconds = sum(r.get("seconds") or 0.0 for r in records)
            case = _element(suite, "testcase", classname=f"verify.{op}.{name}", name=check, time=f"{seconds:.3f}")
            failed = [r for r in records if not r.get("passed")]
            waived = [r for r in records if r.get("waived")]
            if waived and not failed:  # a declared deviation: neither passed nor failed
                _element(case, "skipped", message=f"waived: {waived[0]['waived']} ({len(waived)} of {len(records)} "
                                                  f"cases fail {check} by design; first: {waived[0].get('case_id')})")
            if check in (k.get("stale_waivers") or []):
                _element(case, "system-out").text = _clean(
                    f"stale waiver: {check} is waived ({(k.get('waivers') or {}).get(check)}) but never failed; remove it")
            if failed:
                worst = verify_report.worst_ratio(r.get("err_ratio") for r in failed) or 0.0
                message = f"{len(failed)} of {len(records)} cases failed {check}"
                if k.get("failure_class") in ("precision", "refused"):
                    message = f"fail ({k['failure_class']}): {message}"
                if k.get("failure_class") == "refused":
                    message += f"; declare the limit: {k['refused']['declaration']}"
                if worst:
                    message += f"; worst error {worst:.3g}x allowed"
                message += f"; first: {failed[0].get('case_id')}"
                _element(case, "failure", message=message, type="CheckFailed").text = _clean(_failure_text(failed))
        if k.get("verdict") == Verdict.ERROR:  # the harness failed: no verdict on the kernel
            case = _element(suite, "testcase", classname=f"verify.{op}.{name}", name="run", time=f"{k.get('seconds') or 0.0:.3f}")
            fault = k.get("harness_error") or {}
            _element(case, "error", message="ERROR (harness): no verdict", type="HarnessError").text = _clean(
                fault.get("summary", "the harness failed"))
        elif k.get("status") not in (None, JobStatus.OK):
            case = _element(suite, "testcase", classname=f"verify.{op}.{name}", name="run", time=f"{k.get('seconds') or 0.0:.3f}")
            _element(case, "error", message=f"kernel run ended with status {k['status']}", type=str(k["status"])).text = _clean(
                f"the worker for {op}/{name} ended with status {k['status']}; see the crash records in verify.json")
        if k.get("verdict") == Verdict.NOT_VERIFIED:  # every check passed, but nothing proves the kernel right
            case = _element(suite, "testcase", classname=f"verify.{op}.{name}", name="verified", time="0")
            _element(case, "failure", message=f"not verified: {k.get('unverified_reason')}", type="NotVerified").text = _clean(
                f"{op}/{name} failed no check but is not verified: {k.get('unverified_reason')}")
        _finish(suite)


def _mutation_suite(root: ET.Element, mutation: dict) -> None:
    suite = _suite(root, "mutation", mutation, mutation.get("created"))
    if mutation.get("refused"):
        case = _element(suite, "testcase", classname="mutation", name="sanity", time="0")
        _element(case, "error", message="the campaign refused to score", type="Refused").text = _clean(mutation["refused"])
    for m in mutation.get("mutants", []):
        case = _element(suite, "testcase", classname=f"mutation.{m.get('op')}", name=m.get("name"), time=f"{m.get('seconds') or 0.0:.3f}")
        status = m.get("status")
        if status == Status.SURVIVED:
            _element(case, "failure", message=f"mutant survived: no check detected it ({m.get('location') or '-'})",
                     type="MutantSurvived").text = _clean(m.get("diff") or m.get("description") or "(no diff: a plugin mutant)")
        elif status in (Status.INCOMPETENT, Status.EQUIVALENT):
            _element(case, "skipped", message=f"{status}: {m.get('note') or '-'}")
        elif m.get("killed_by"):
            out = _element(case, "system-out")
            kb = m["killed_by"]
            out.text = _clean(f"{status} by {kb.get('check')} on {kb.get('case_id')}\nrepro: {kb.get('repro') or '-'}")
    score = mutation.get("score")
    if score is not None and mutation.get("min_score") is not None and not mutation.get("refused"):
        case = _element(suite, "testcase", classname="mutation", name="score", time="0")
        if score < mutation["min_score"]:
            _element(case, "failure", message=f"mutation score {score:.4f} below the minimum {mutation['min_score']}", type="ScoreBelowMinimum")
    _finish(suite)


def render(verify: dict | None, mutation: dict | None) -> str:
    root = ET.Element("testsuites", {"name": "triton-verify"})
    if verify is not None:
        _verify_suites(root, verify)
    if mutation is not None:
        _mutation_suite(root, mutation)
    totals = [0, 0, 0, 0, 0.0]
    for suite in root.findall("testsuite"):
        for i, key in enumerate(("tests", "failures", "errors", "skipped", "time")):
            totals[i] += float(suite.get(key)) if key == "time" else int(suite.get(key))
    for i, key in enumerate(("tests", "failures", "errors", "skipped")):
        root.set(key, str(totals[i]))
    root.set("time", f"{totals[4]:.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
