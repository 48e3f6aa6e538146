"""The reports written when rendering failed: they say so, and they fail.

A renderer's bug must never leave an earlier run's PASS summary or JUnit file standing, nor
leave CI with nothing to show: summary.md names the failure and the verdicts the JSON holds,
junit.xml holds one failing test case. Written from plain dict lookups only, so that they
cannot fail the way the renderer did.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

__all__ = ["summary", "junit"]


def _verdict(data: dict | None) -> str:
    if data is None:
        return "not run"
    return {True: "PASS", False: "FAIL"}.get(data.get("passed"), "unknown")


def _plain(text: str) -> str:
    return "".join(c if c.isprintable() else " " for c in text)


def summary(verify: dict | None, mutation: dict | None, reason: str) -> str:
    return "\n".join([
        "## Kernel verification: **rendering FAILED**",
        "",
        f"The reports could not be rendered ({_plain(reason)}); this summary is not a verdict.",
        "",
        f"- verify.json: **{_verdict(verify)}**",
        f"- mutation.json: **{_verdict(mutation)}**",
        "",
        "Re-render with `python -m harness report --report-dir DIR`; the JSON reports hold every result.",
    ]) + "\n"


def junit(verify: dict | None, mutation: dict | None, reason: str) -> str:
    root = ET.Element("testsuites", name="kernel verification", tests="1", failures="1", errors="0")
    suite = ET.SubElement(root, "testsuite", name="reports", tests="1", failures="1", errors="0")
    case = ET.SubElement(suite, "testcase", classname="reports", name="rendering")
    failure = ET.SubElement(case, "failure", message=_plain(f"rendering the reports failed: {reason}")[:500])
    failure.text = f"verify.json: {_verdict(verify)}; mutation.json: {_verdict(mutation)}"
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
