"""index.html as a reader sees it: headless Chromium loads the file, runs its script, and we
read the resulting DOM (``--dump-dom``) and a screenshot.

Bug classes targeted: a filter that hides the wrong rows or ignores the URL, a summary that
does not show the verdicts, a page that renders blank or broken in a real browser.
Needs Debian's chromium (``make browser`` installs it); skipped, with that reason, without it.
"""

import os
import re
import shutil
import struct
import subprocess
from html.parser import HTMLParser

import pytest

from harness.cli import report as report_cli
from test_reports_data import BAD, GOOD, expected_failures, mutation_report, verify_report

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# as root, in a sandbox with no network: no sandbox, no GPU, no background connections
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage")
TIMEOUT_S = 90


def _find_browser() -> str | None:
    explicit = os.environ.get("CHROMIUM")
    if explicit:
        return explicit
    return next((path for path in map(shutil.which, BROWSERS) if path), None)


class _Page(HTMLParser):
    """The case-table rows (their data-* attributes and whether they are hidden), the text of
    the summary table's rows, and the text of elements with an id."""

    def __init__(self, html_text: str):
        super().__init__()
        self.rows: list[dict] = []
        self.summary: dict[str, str] = {}
        self._summary_row: str | None = None
        self._summary_text: list[str] = []
        self.feed(html_text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr" and "data-verdict" in a:
            self.rows.append({**a, "hidden": "hidden" in a})
        elif tag == "tr" and "data-kernel" in a:
            self._summary_row, self._summary_text = a["data-kernel"], []

    def handle_endtag(self, tag):
        if tag == "tr" and self._summary_row is not None:
            self.summary[self._summary_row] = " ".join(" ".join(self._summary_text).split())
            self._summary_row = None

    def handle_data(self, data):
        if self._summary_row is not None:
            self._summary_text.append(data)

    def visible(self) -> list[dict]:
        return [r for r in self.rows if not r["hidden"]]


def _count_text(dom: str) -> str:
    match = re.search(r'id="case-count"[^>]*>([^<]*)<', dom)
    assert match, "the case count is missing from the page"
    return match.group(1)


@pytest.fixture(scope="module")
def browser():
    path = _find_browser()
    if path is None:
        pytest.skip("chromium is not installed: `make browser` installs Debian's chromium "
                    "(apt-get install chromium); set CHROMIUM=/path/to/chrome to use another")
    return path


@pytest.fixture(scope="module")
def rendered(browser, tmp_path_factory):
    """Render two report directories, then run every browser load in parallel (2-core CI)."""
    import json

    verify_only = tmp_path_factory.mktemp("verify_only")
    (verify_only / "verify.json").write_text(json.dumps(verify_report()))
    full = tmp_path_factory.mktemp("full")
    (full / "verify.json").write_text(json.dumps(verify_report()))
    (full / "mutation.json").write_text(json.dumps(mutation_report()))
    for d in (verify_only, full):
        report_cli.write_all(d)
    shot = full / "screenshot.png"
    loads = {
        "plain": ["--dump-dom", (verify_only / "index.html").as_uri()],
        "hash": ["--dump-dom", (verify_only / "index.html").as_uri() + f"#verdict=failed&kernel={BAD}"],
        "query": ["--dump-dom", (full / "index.html").as_uri() + "?dtype=float16&check=dgamma"],
        "shot": ["--window-size=1280,2000", "--hide-scrollbars", f"--screenshot={shot}", (full / "index.html").as_uri()],
    }
    procs = {
        name: subprocess.Popen([browser, *FLAGS, f"--user-data-dir={tmp_path_factory.mktemp('profile_' + name)}", *args],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, args in loads.items()
    }
    out = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
        assert proc.returncode == 0, f"chromium failed on {name}: {stderr[-2000:]}"
        out[name] = stdout
    out["screenshot"] = shot
    return out


def _check_summary(dom: str) -> None:
    page = _Page(dom)
    assert set(page.summary) == {GOOD, BAD}
    assert "PASS" in page.summary[GOOD] and "FAIL" not in page.summary[GOOD]
    assert "FAIL" in page.summary[BAD]
    assert "mutation testing: not run" in dom


def _check_unfiltered(dom: str) -> None:
    page = _Page(dom)
    n = len(verify_report()["cases"])
    assert len(page.rows) == n and not any(r["hidden"] for r in page.rows)
    assert _count_text(dom) == f"showing {n} of {n} rows"


def _check_hash_filter(dom: str) -> None:
    page = _Page(dom)
    visible = page.visible()
    assert visible and all(r["data-verdict"] == "failed" and r["data-kernel"] == BAD for r in visible)
    expected = expected_failures(verify_report())
    assert len(visible) == expected
    assert _count_text(dom) == f"showing {expected} of {len(page.rows)} rows"


def _check_query_filter(dom: str) -> None:
    page = _Page(dom)
    expected = sum(1 for r in verify_report()["cases"] if r["dtype"] == "float16" and r["check"] == "dgamma")
    visible = page.visible()
    assert len(visible) == expected > 0
    assert all(r["data-dtype"] == "float16" and r["data-check"] == "dgamma" for r in visible)
    assert "mutation testing: not run" not in dom


def _check_screenshot(path) -> None:
    """A blank or failed render gives a tiny, uniform PNG; the header, summary and plots make a large one."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1280, 2000)
    assert len(data) > 50_000


def test_report_in_chromium(rendered):
    """One test, so that pytest-xdist starts the browsers once (a module fixture runs once per worker)."""
    _check_summary(rendered["plain"])
    _check_unfiltered(rendered["plain"])
    _check_hash_filter(rendered["hash"])
    _check_query_filter(rendered["query"])
    _check_screenshot(rendered["screenshot"])
