"""verify starts its longest kernels first (harness.incremental.costs): order only, never a verdict."""

import json
from types import SimpleNamespace

from harness.incremental import costs


def _entry(op, name):
    return SimpleNamespace(op=op, name=name)


def _report(backend, **seconds):
    return {"backend": backend, "kernels": [{"op": "o", "name": n, "seconds": s / 2, "worker_seconds": s}
                                           for n, s in seconds.items()]}


def test_longest_first_and_a_kernel_without_a_figure_before_all():
    entries = [_entry("o", n) for n in ("short", "new", "long", "mid")]
    order = costs.longest_first(entries, {"o/short": 5.0, "o/long": 190.0, "o/mid": 60.0})
    assert [e.name for e in order] == ["new", "long", "mid", "short"]


def test_the_last_verify_of_the_same_backend_overrides_the_committed_figures(tmp_path, monkeypatch):
    committed = tmp_path / "verify_costs.json"
    committed.write_text(json.dumps({"format": costs.FORMAT, "backends": {"interpreter": {"o/a": 100.0, "o/b": 1.0}}}))
    monkeypatch.setattr(costs, "COMMITTED", committed)
    folder = tmp_path / "out"
    folder.mkdir()
    assert costs.expected(folder, "interpreter") == {"o/a": 100.0, "o/b": 1.0}  # a fresh clone: the committed ones
    (folder / "verify.json").write_text(json.dumps(_report("interpreter", b=300.0)))
    assert costs.expected(folder, "interpreter") == {"o/a": 100.0, "o/b": 300.0}
    assert costs.expected(folder, "cuda") == {}  # another backend's figures say nothing here
    (folder / "verify.json").write_text("{not json")
    assert costs.expected(folder, "interpreter") == {"o/a": 100.0, "o/b": 1.0}  # unreadable: ignored


def test_the_committed_file_is_written_from_verify_reports(tmp_path, capsys):
    path = tmp_path / "verify.json"
    path.write_text(json.dumps(_report("interpreter", a=12.34, b=0.0)))
    assert costs.main([str(path)]) == 0
    assert json.loads(capsys.readouterr().out) == {"format": costs.FORMAT, "backends": {"interpreter": {"o/a": 12.3}}}
    (tmp_path / "bad.json").write_text("[]")
    assert costs.main([str(tmp_path / "bad.json")]) == 2


def test_the_committed_figures_name_registered_kernels():
    # a renamed kernel leaves a figure that orders nothing: the file is regenerated, not edited
    from harness.registry.registry import REGISTRY, load_builtin_ops
    from harness.registry import loader

    load_builtin_ops()
    loader.load_all()
    known = {f"{e.op}/{e.name}" for e in REGISTRY.select(kind="kernel") if e.origin == "project"}
    data = json.loads(costs.COMMITTED.read_text())
    for backend, figures in data["backends"].items():
        assert set(figures) <= known, (backend, set(figures) - known)
