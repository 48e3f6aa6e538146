"""The user documentation against the code it describes: README's commands table against the
CLI's subcommands, every relative link of README.md and docs/*.md against the files, README's
length, and each subcommand's --help (a one-line description and an example).

Bug classes targeted: a subcommand added or renamed without the README following (or a README
row for a command that no longer exists), a link left dangling when a page moves, a README that
grows back into a notebook, a --help that says nothing a newcomer can act on.
No kernel runs: the CLI's argparse parser is introspected in this process.
"""

import argparse
import re
import shlex
from pathlib import Path

import pytest

from harness.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
MAX_README_LINES = 250
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
TABLE_COMMAND = re.compile(r"^\|\s*`python -m harness ([a-z][a-z-]*)[^`]*`\s*\|\s*(.*?)\s*\|\s*$")


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _table_rows() -> dict[str, str]:
    rows = {}
    for line in README.read_text().splitlines():
        if m := TABLE_COMMAND.match(line):
            assert m.group(1) not in rows, f"README lists `{m.group(1)}` twice"
            rows[m.group(1)] = m.group(2)
    return rows


def _table_commands() -> list[str]:
    return list(_table_rows())


def test_readme_commands_table_matches_the_cli():
    table = _table_commands()
    cli = set(_subparsers())
    assert table, "README.md has no commands table (rows like | `python -m harness verify` | ... |)"
    assert len(table) == len(set(table)), f"a subcommand is listed twice: {sorted(table)}"
    assert set(table) - cli == set(), f"README lists subcommands the CLI does not have: {sorted(set(table) - cli)}"
    assert cli - set(table) == set(), f"subcommands missing from README's commands table: {sorted(cli - set(table))}"


def test_readme_commands_table_says_what_each_help_says():
    subs = _subparsers()
    for name, cell in _table_rows().items():
        said = cell.replace("`", "")
        assert said.startswith(subs[name].description), (
            f"README's row for `{name}` should start with its --help description {subs[name].description!r}; got {said!r}")


def _links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # code blocks hold no links
    text = re.sub(r"`[^`\n]*`", "", text)  # nor do inline code spans (`fn[grid](...)`)
    return LINK.findall(text)


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces to
    hyphens, a repeated heading suffixed -1, -2, ..."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    seen: dict[str, int] = {}
    anchors = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    broken = []
    for target in _links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # http(s), mailto: not checked here
        if target.startswith("#"):
            target = page.name + target  # an anchor in the same page
        path, _, anchor = target.partition("#")
        file = page.parent / path
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(f"{target} (no such heading)")
    assert not broken, f"{page.relative_to(ROOT)}: links to files or headings that do not exist: {broken}"


def test_docs_pages_are_linked_and_link_checks_see_links():
    assert _links(README), "README.md holds no links: the link check would pass vacuously"
    linked = {(README.parent / t.split("#", 1)[0]).resolve() for t in _links(README) if not t.startswith("#")}
    for page in PAGES[1:]:
        assert page.resolve() in linked, f"README.md does not link {page.relative_to(ROOT)}"


def test_readme_is_short():
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; at most {MAX_README_LINES} (the rest goes to docs/)"


@pytest.mark.parametrize("name", sorted(_subparsers()))
def test_subcommand_help_has_one_line_description_and_an_example(name):
    sub = _subparsers()[name]
    description = sub.description or ""
    assert description.strip() and "\n" not in description.strip(), f"{name}: description must be one line: {description!r}"
    epilog = sub.epilog or ""
    examples = [line.strip() for line in epilog.splitlines() if line.strip().startswith(f"python -m harness {name}")]
    assert examples, f"{name}: --help shows no example line starting with 'python -m harness {name}'"
    assert isinstance(sub.formatter_class, type) and issubclass(sub.formatter_class, argparse.RawDescriptionHelpFormatter)
    text = sub.format_help()
    assert examples[0] in text, f"{name}: the example is not shown by --help"
    args = build_parser().parse_args(shlex.split(examples[0])[3:])  # the example is a valid command line
    assert args.command == name


def test_top_level_help_has_description_and_example():
    parser = build_parser()
    assert parser.description and "\n" not in parser.description
    assert "python -m harness " in (parser.epilog or "")
    assert "python -m harness " in parser.format_help()


def test_anchor_slugs_follow_github(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# Title\n## Run 25 (2026-12-01) — after `x`; 4.9 s\n## Title\n```\n# not a heading\n```\n")
    assert _anchors(page) == {"title", "run-25-2026-12-01--after-x-49-s", "title-1"}


def test_the_readme_screenshot_is_made_by_make_screenshot_from_the_readmes_command():
    # bug class: a screenshot from an older run that shows other numbers than the text beside it
    import re
    import shlex

    text = README.read_text()
    assert "![" in text and "(docs/figures/report_verify.png)" in text
    shown = re.search(r"^\$ \.venv/bin/triton-verify (verify .*)$", text, re.M)
    assert shown, "README's five-minute example shows no `$ .venv/bin/triton-verify verify ...` line"
    script = (ROOT / "scripts" / "screenshot.sh").read_text()
    assert "docs/figures/report_verify.png" in script
    made = re.search(r"\.venv/bin/triton-verify (verify [^\n]*\\\n[^\n]*)", script).group(1).replace("\\\n", " ")
    extra = {"--no-cache", "--report-dir", '"$out"'}
    assert [w for w in shlex.split(made, posix=False) if w not in extra] == shlex.split(shown.group(1), posix=False)
    assert re.search(r"^screenshot: setup\n\t@scripts/screenshot\.sh$", (ROOT / "Makefile").read_text(), re.M)
    glossary = (ROOT / "docs" / "glossary.md").read_text()
    for term in ("floor", "incompetent", "equivalent", "carrier", "kill cache", "waiver", "refilled", "specialization",
                 "weak kill"):
        assert f"**{term}" in glossary.lower() or f"**{term}" in glossary, f"glossary.md does not define {term!r}"
