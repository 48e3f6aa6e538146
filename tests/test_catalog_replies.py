"""The catalog child's saved replies (harness.registry.catalog): a project-only request is answered
from build/catalog/ while nothing the child reads has changed, and by a child otherwise.

Bug class: a saved reply standing for kernels that have changed since (a stale registry: a
contract, a closure or a kernel that no longer is), or for a run with plugins, whose user code
must be described by a child every time."""

from __future__ import annotations

import pytest

from harness.registry import catalog

PROJECT = {"plugins": [], "op": None, "select": "*", "case": None}


@pytest.fixture
def asked(tmp_path, monkeypatch):
    root = tmp_path / "project"
    (root / "kernels").mkdir(parents=True)
    (root / "kernels" / "__init__.py").write_text("")
    (root / "kernels" / "k.py").write_text("BLOCK = 64\n")
    (root / "tests").mkdir()
    (root / "tests" / "__init__.py").write_text("")
    (root / "reports" / "out").mkdir(parents=True)  # a report folder: not a package, never read
    monkeypatch.setattr(catalog, "PROJECT_ROOT", root)
    monkeypatch.setattr(catalog, "_REPLIES", tmp_path / "build" / "catalog")
    monkeypatch.delenv("HARNESS_SPECIALIZE_ALL", raising=False)
    calls = []

    def ask(request, child=None):  # child: one started ahead (catalog.start), none in these tests
        calls.append(request)
        return {"ops": {}, "kernels": [], "files": {}, "call": len(calls)}

    monkeypatch.setattr(catalog, "_ask", ask)
    return root, calls


def test_an_unchanged_project_is_answered_without_a_child(asked):
    root, calls = asked
    first = catalog._replied(PROJECT)
    assert catalog._replied(PROJECT) == first and len(calls) == 1
    (root / "tests" / "test_k.py").write_text("x = 1\n")  # a test is no source the child reads
    (root / "reports" / "out" / "helper.py").write_text("x = 1\n")  # nor a file of a report folder
    assert catalog._replied(PROJECT) == first and len(calls) == 1


@pytest.mark.parametrize("change", ["source", "new_module", "environment", "request", "distribution"])
def test_a_change_the_child_would_see_asks_it_again(asked, monkeypatch, tmp_path, change):
    root, calls = asked
    site = tmp_path / "site"
    (site / "liger_kernel-0.8.5.dist-info").mkdir(parents=True)
    monkeypatch.syspath_prepend(str(site))
    catalog._replied(PROJECT)
    request = PROJECT
    if change == "source":
        (root / "kernels" / "k.py").write_text("BLOCK = 128\n")
    elif change == "new_module":
        (root / "kernels" / "other.py").write_text("")
    elif change == "environment":
        monkeypatch.setenv("HARNESS_SPECIALIZE_ALL", "1")  # read when a kernel module is imported
    elif change == "distribution":
        (site / "liger_kernel-0.8.5.dist-info").rename(site / "liger_kernel-0.8.6.dist-info")  # an upgrade
    else:
        request = {**PROJECT, "op": "softmax"}
    assert catalog._replied(request)["call"] == 2 and len(calls) == 2


def test_a_request_with_plugins_always_asks_a_child(asked):
    _, calls = asked
    with_plugin = {**PROJECT, "plugins": ["my_kernels.py"]}
    catalog._replied(with_plugin)
    catalog._replied(with_plugin)
    assert len(calls) == 2


def test_an_error_reply_is_not_kept(asked, monkeypatch):
    _, calls = asked
    monkeypatch.setattr(catalog, "_ask", lambda request, child=None: calls.append(request) or {"error": {"type": "UsageError", "message": "x"}})
    catalog._replied(PROJECT)
    catalog._replied(PROJECT)
    assert len(calls) == 2


def test_the_run_group_of_each_make_verify_is_not_a_change(asked, monkeypatch):
    from reports.manifest import GROUP_ENV

    _, calls = asked
    monkeypatch.setenv(GROUP_ENV, "make-verify-1")
    catalog._replied(PROJECT)
    monkeypatch.setenv(GROUP_ENV, "make-verify-2")  # the Makefile names every run's group anew
    catalog._replied(PROJECT)
    assert len(calls) == 1
