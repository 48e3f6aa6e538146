"""Figures for the HTML report, returned as base64 PNG so the page needs no other file.

Reads report dicts only. matplotlib is imported lazily with the Agg backend; without it
every function returns None and the page says the plots are unavailable.
"""

from __future__ import annotations

import base64
import io
import math

from vocabulary import STATUS_ORDER, Status

__all__ = ["available", "error_ratio_figure", "kill_matrix_figure", "MAX_KERNEL_PANELS"]

MAX_KERNEL_PANELS = 12
MAX_MUTANT_ROWS = 300
MAX_POINTS_PER_PANEL = 2500
DTYPE_COLORS = {
    "float64": "#6a3d9a",
    "float32": "#1f77b4",
    "float16": "#ff7f0e",
    "bfloat16": "#2ca02c",
}
OTHER_COLOR = "#7f7f7f"
CHECK_MARKERS = {"forward": "o", "dx": "^", "dgamma": "s"}
OTHER_MARKER = "D"


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def available() -> bool:
    """Whether matplotlib is installed, without importing it (about 1 s): a report whose pictures
    all come from the plot cache never needs it."""
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def _png(fig, plt) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _size(record: dict) -> int:
    if record.get("numel"):
        return int(record["numel"])
    shape = (record.get("shape") or [[1]])[0] or [1]
    return max(1, math.prod(shape))


def _thin(cases: list[dict]) -> list[dict]:
    """At most MAX_POINTS_PER_PANEL points: every case near or above the tolerance (ratio >= 0.5),
    then an even stride through the rest, so the picture keeps its shape and its failures."""
    if len(cases) <= MAX_POINTS_PER_PANEL:
        return cases
    near = [c for c in cases if not c["err_ratio"] < 0.5]  # NaN counts as near: it is a failure
    rest = [c for c in cases if c["err_ratio"] < 0.5]
    room = max(0, MAX_POINTS_PER_PANEL - len(near))
    step = max(1, math.ceil(len(rest) / room)) if room else len(rest) + 1
    return near + rest[::step]


def error_ratio_figure(cases: list[dict], kernels: list[dict]) -> str | None:
    """One panel per kernel: worst error / allowed error of every value check, against the
    number of compared elements (both log scale), colored by dtype, marker by check; the
    dashed line at 1.0 is the tolerance. A ratio of 0 (bit-exact) is drawn at the floor; a
    NaN or infinite ratio (a kernel that forgot eps, an fp16 overflow) as a red X at the top
    edge, counted in the panel: axis limits must be finite, and such a case must stay visible."""
    plt = _pyplot()
    if plt is None:
        return None
    valued = [c for c in cases if c.get("err_ratio") is not None]
    if not valued:
        return None
    names = [k["name"] for k in kernels if any(c["kernel"] == k["name"] for c in valued)][:MAX_KERNEL_PANELS]
    verdict = {k["name"]: k["passed"] for k in kernels}
    positive = [c["err_ratio"] for c in valued if c["err_ratio"] > 0 and math.isfinite(c["err_ratio"])]
    floor = min(min(positive, default=1e-3) / 3, 1e-3)
    top = max(max(positive, default=1.0) * 3, 3.0)
    cols = 2 if len(names) > 1 else 1
    rows = math.ceil(len(names) / cols)
    height = 3.4 * rows + 0.6
    fig, axes = plt.subplots(rows, cols, figsize=(6.4 * cols if cols > 1 else 9.6, height), squeeze=False)
    # fixed margins: tight_layout costs seconds on log axes
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.55 / height, top=1 - 0.75 / height,
                        hspace=0.5, wspace=0.22)
    dtypes_seen, checks_seen = set(), set()
    for ax, name in zip(axes.flat, names):
        mine, total = _thin([c for c in valued if c["kernel"] == name]), sum(1 for c in valued if c["kernel"] == name)
        if len(mine) < total:
            ax.text(0.01, 0.98, f"{len(mine)} of {total} points drawn (all above 0.5)", transform=ax.transAxes,
                    fontsize=7, va="top", color="#57606a")
        nonfinite = [c for c in mine if not math.isfinite(c["err_ratio"])]
        if nonfinite:
            ax.scatter([_size(c) for c in nonfinite], [top / 1.3] * len(nonfinite), s=40, marker="X", color="#cf222e")
            ax.text(0.99, 0.98, f"{len(nonfinite)} NaN/inf error(s), drawn at the top", transform=ax.transAxes,
                    fontsize=7, va="top", ha="right", color="#cf222e")
        groups: dict[tuple[str, str], list[dict]] = {}
        for c in mine:
            if not math.isfinite(c["err_ratio"]):
                continue
            groups.setdefault((c["dtype"], c["check"]), []).append(c)
        for (dtype, check), group in sorted(groups.items()):
            dtypes_seen.add(dtype)
            checks_seen.add(check)
            ax.scatter(
                [_size(c) for c in group],
                [max(c["err_ratio"], floor) for c in group],
                s=18, alpha=0.7, linewidths=0,
                color=DTYPE_COLORS.get(dtype, OTHER_COLOR),
                marker=CHECK_MARKERS.get(check, OTHER_MARKER),
            )
        ax.axhline(1.0, color="#d62728", linestyle="--", linewidth=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(floor / 1.5, top)
        ax.set_title(f"{name}  {'PASS' if verdict.get(name) else 'FAIL'}", fontsize=10,
                     color="#1a7f37" if verdict.get(name) else "#cf222e")
        ax.set_xlabel("elements compared", fontsize=8)
        ax.set_ylabel("worst error / allowed", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, which="major", alpha=0.3)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], linestyle="", marker="o", color=DTYPE_COLORS.get(d, OTHER_COLOR), label=d)
               for d in sorted(dtypes_seen)]
    handles += [Line2D([], [], linestyle="", marker=CHECK_MARKERS.get(c, OTHER_MARKER), color="#444", label=c)
                for c in sorted(checks_seen)]
    handles.append(Line2D([], [], color="#d62728", linestyle="--", label="allowed (1.0)"))
    fig.legend(handles=handles, loc="upper center", ncol=min(len(handles), 8), fontsize=8, frameon=False)
    return _png(fig, plt)


def kill_matrix_figure(mutation: dict) -> str | None:
    """Mutants (rows) by the check that detected them (columns); survivors are the empty rows,
    labelled in red. Timeouts and crashes appear under the check their worker recorded."""
    plt = _pyplot()
    if plt is None:
        return None
    mutants = [m for m in mutation.get("mutants", []) if m.get("status") != Status.INCOMPETENT]
    if not mutants:
        return None
    order = {s.value: i for i, s in enumerate(STATUS_ORDER)}
    mutants = sorted(mutants, key=lambda m: (order.get(m.get("status"), len(order)), m.get("op", ""), m.get("name", "")))
    mutants = mutants[:MAX_MUTANT_ROWS]
    matrix = mutation.get("kill_matrix") or {}
    kills: dict[str, set[str]] = {}
    for m in mutants:
        checks = set((matrix.get(m["name"]) or {}).keys())
        if m.get("killed_by"):
            checks.add(m["killed_by"]["check"])
        kills[m["name"]] = checks
    columns = sorted({c for cs in kills.values() for c in cs}) or ["(no detection)"]
    grid = [[1.0 if col in kills[m["name"]] else 0.0 for col in columns] for m in mutants]
    height = max(2.5, 0.22 * len(mutants) + 1.6)
    width = max(4.5, 0.8 * len(columns) + 4.0)
    fig, ax = plt.subplots(figsize=(width, height))
    ax.imshow(grid, aspect="auto", cmap="Greens", vmin=0, vmax=1.3, interpolation="nearest")
    ax.set_xticks(range(len(columns)))
    ax.set_xticklabels(columns, rotation=35, ha="right", fontsize=8)
    ax.set_yticks(range(len(mutants)))
    ax.set_yticklabels([f"{m['name']} [{m.get('status')}]" for m in mutants], fontsize=7)
    for label, m in zip(ax.get_yticklabels(), mutants):
        if m.get("status") == Status.SURVIVED:
            label.set_color("#cf222e")
            label.set_fontweight("bold")
        elif m.get("status") == Status.EQUIVALENT:
            label.set_color("#0969da")
    ax.set_xticks([x - 0.5 for x in range(1, len(columns))], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, len(mutants))], minor=True)
    ax.grid(which="minor", color="#ddd", linewidth=0.5)
    ax.tick_params(which="minor", length=0)
    ax.set_xlabel("check that detected the mutant", fontsize=9)
    ax.set_title("kill matrix", fontsize=10)
    fig.tight_layout()
    return _png(fig, plt)
