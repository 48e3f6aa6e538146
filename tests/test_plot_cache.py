"""reports.plot_cache: an unchanged report draws no figure again, a changed one always does.
Bug classes: a stale figure shown for new data (a key that misses an input), a cache that
grows without bound, a user's file in the folder read or removed."""

from reports import manifest, plot_cache


def _counting():
    calls = []

    def figure(data):
        calls.append(data)
        return f"png of {data['x']}"

    return figure, calls


def test_the_same_data_is_drawn_once_and_other_data_anew(tmp_path):
    figure, calls = _counting()
    assert plot_cache.PlotCache(tmp_path).draw(figure, {"x": 1}) == "png of 1"
    assert plot_cache.PlotCache(tmp_path).draw(figure, {"x": 1}) == "png of 1"
    assert len(calls) == 1
    assert plot_cache.PlotCache(tmp_path).draw(figure, {"x": 2}) == "png of 2"
    assert len(calls) == 2


def test_no_figure_is_kept_as_none_and_without_a_directory_nothing_is_kept(tmp_path):
    calls = []

    def nothing(data):
        calls.append(data)
        return None

    for _ in range(2):
        assert plot_cache.PlotCache(tmp_path).draw(nothing, {"x": 1}) is None
    assert len(calls) == 1
    figure, counted = _counting()
    plot_cache.PlotCache(None).draw(figure, {"x": 1})
    plot_cache.PlotCache(None).draw(figure, {"x": 1})
    assert len(counted) == 2


def test_prune_keeps_the_figures_of_the_last_page_and_never_a_users_file(tmp_path):
    figure, _ = _counting()
    first = plot_cache.PlotCache(tmp_path)
    first.draw(figure, {"x": 1})
    second = plot_cache.PlotCache(tmp_path)
    second.draw(figure, {"x": 2})
    folder = tmp_path / plot_cache.FOLDER
    mine = folder / "plot-mine.b64"
    mine.write_text("my own notes")
    second.prune()
    assert sorted(p.name for p in folder.glob("plot-*.b64")) == sorted([*second.used, "plot-mine.b64"])
    assert mine.read_text() == "my own notes" and not manifest.owns(folder, mine.name)


def test_a_report_rendered_twice_is_the_same_page(tmp_path):
    import json

    from test_reports_data import mutation_report, verify_report

    from harness.cli import report as report_cli
    from reports import writer

    writer.write_json(tmp_path, "verify.json", verify_report())
    writer.write_json(tmp_path, "mutation.json", mutation_report())
    report_cli.write_all(tmp_path)
    first = (tmp_path / "index.html").read_text()
    report_cli.write_all(tmp_path)
    assert (tmp_path / "index.html").read_text() == first
    assert len(list((tmp_path / plot_cache.FOLDER).glob("plot-*.b64"))) >= 1
    assert json.loads((tmp_path / "verify.json").read_text())
