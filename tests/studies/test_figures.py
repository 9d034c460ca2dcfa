"""Every study figure is fit for a paper (issue 51): all its text (titles, axis labels, tick labels, legends) lies
inside its canvas and no two pieces of text overlap (matplotlib's renderer extents), no panel is empty, every
measured axis names its unit, and each figure is written as a 300 dpi PNG beside a vector PDF.

The figures are drawn by the studies' own functions with the shipped studies' names, grids and titles, on
synthetic tables of the studies' shape (drawing needs no run)."""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path

import matplotlib.pyplot
import matplotlib.text
import matplotlib.ticker
import numpy as np
import pandas as pd
import pytest
from matplotlib.transforms import Bbox

import cvxdp.studies.figures
from cvxdp.studies.graph import load_graph_study, write_graph_figures
from cvxdp.studies.grid import load_study, write_figures
from cvxdp.studies.sharing import write_sharing_figures
from cvxdp.studies.total import load_total_study, write_total_figure

CASES = Path(__file__).resolve().parents[1] / "cases"
RNG = np.random.default_rng(0)


def _drawn_texts(fig) -> list[tuple[str, Bbox]]:
    """(text, window extent) of every piece of text the renderer draws: titles, axis labels, the tick labels of
    the ticks inside the view, offset texts, legend entries and titles, figure titles."""
    renderer = fig.canvas.get_renderer()
    texts = [fig._suptitle, fig._supxlabel, fig._supylabel, *fig.texts]
    legends = list(fig.legends)
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        texts += [ax.title, ax._left_title, ax._right_title, *ax.texts]
        legends.append(ax.get_legend())
        if not ax.axison:
            continue
        for axis in (ax.xaxis, ax.yaxis):
            texts += [axis.label, axis.offsetText]
            scale = axis.get_transform()  # compared in the axis's own scale (log: decades), as matplotlib draws
            low, high = sorted(scale.transform(np.asarray(axis.get_view_interval(), dtype=float)))
            slack = 1e-9 * (high - low)
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if low - slack <= scale.transform([float(tick.get_loc())])[0] <= high + slack:
                    texts += [tick.label1, tick.label2]
    for legend in filter(None, legends):
        texts += [*legend.get_texts(), legend.get_title()]
    unique = {id(t): t for t in texts if t is not None}.values()  # the suptitle is also one of fig.texts
    return [(t.get_text(), t.get_window_extent(renderer)) for t in unique if t.get_visible() and t.get_text().strip()]


def _categorical(axis) -> bool:
    """Whether ``axis`` shows named categories (fixed ticks labelled with words), not a measured quantity."""
    words = [t.get_text().replace("mathdefault", "") for t in axis.get_ticklabels()]
    return isinstance(axis.get_major_locator(), matplotlib.ticker.FixedLocator) and \
        any(any(c.isalpha() for c in w) for w in words)


def _overlap(a: Bbox, b: Bbox) -> float:
    width = min(a.x1, b.x1) - max(a.x0, b.x0)
    height = min(a.y1, b.y1) - max(a.y0, b.y0)
    return max(width, 0.0) * max(height, 0.0)


def check_figure(fig, path: Path) -> None:
    """The checks of this module on one figure, before it is saved."""
    fig.canvas.draw()
    canvas = fig.bbox
    texts = _drawn_texts(fig)
    for text, box in texts:
        assert box.x0 >= canvas.x0 - 1 and box.x1 <= canvas.x1 + 1 and box.y0 >= canvas.y0 - 1 and \
            box.y1 <= canvas.y1 + 1, f"{path.name}: {text!r} lies outside the canvas ({box} vs {canvas})"
    for (s, a), (t, b) in itertools.combinations(texts, 2):
        smaller = min(a.width * a.height, b.width * b.height)
        assert _overlap(a, b) <= 0.05 * smaller, f"{path.name}: {s!r} overlaps {t!r}"
    for ax in fig.axes:
        assert ax.get_visible(), f"{path.name}: a hidden (empty) panel"
        if not ax.axison:  # a panel that holds the legend only
            assert ax.get_legend() is not None, f"{path.name}: an empty panel"
            continue
        assert ax.lines or ax.collections or ax.patches or ax.containers, f"{path.name}: an empty panel"
        if ax.get_ylabel():
            assert "[" in ax.get_ylabel() and "]" in ax.get_ylabel(), f"{path.name}: no unit in {ax.get_ylabel()!r}"
    rows = {}
    for ax in fig.axes:
        if ax.axison:
            rows.setdefault(round(ax.get_position().y0, 3), []).append(ax)
    for row in rows.values():  # a measured y axis is labelled (categories name themselves)
        assert any(ax.get_ylabel() or _categorical(ax.yaxis) for ax in row), \
            f"{path.name}: a row of panels without a y label"
    bottom = min(rows)
    assert all(ax.get_xlabel() for ax in rows[bottom]), f"{path.name}: a bottom panel without an x label"


@pytest.fixture
def checked(monkeypatch):
    """Every figure the plotting module would save goes through :func:`check_figure` instead (writing the files is
    the last test's subject, not these); the paths are listed."""
    saved: list[Path] = []

    def save(fig, path):
        check_figure(fig, Path(path))
        saved.append(Path(path))
        matplotlib.pyplot.close(fig)
        return Path(path)

    monkeypatch.setattr(cvxdp.studies.figures, "_save", save)
    return saved


def _grid_tables(study, metrics: dict[str, float]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """results and histories of the grid study's shape, log-normal values around ``metrics``."""
    rows, history = [], []
    cells = [(m, e, j, s) for m in study.mechanisms for e in study.epsilons for j in study.local_updates
             for s in study.seeds] + [("none", None, j, study.seeds[0]) for j in study.local_updates]
    rounds = study.rounds or 100
    for mech, eps, J, seed in cells:
        scale = 1e-8 if mech == "none" else 1.0 / eps
        values = {k: v * scale * RNG.lognormal(0, 0.3) for k, v in metrics.items()}
        rows.append({"cell": f"{mech}_{eps}_{J}_{seed}", "mechanism": mech, "epsilon": eps, "local_updates": J,
                     "seed": seed, **values, "noise_magnitude": 0.0 if mech == "none" else 10 / eps})
        decay = np.exp(-np.arange(1, rounds + 1) / 10) if mech == "none" else np.ones(rounds)
        history.append(pd.DataFrame({"round": np.arange(1, rounds + 1), "mechanism": mech, "epsilon": eps,
                                     "local_updates": J, "seed": seed,
                                     **{k: v * decay * RNG.lognormal(0, 0.2, rounds) for k, v in values.items()
                                        if k in ("objective", "consensus_residual", "train_cost")}}))
    with warnings.catch_warnings():  # the baseline's all-NaN epsilon column, as in the studies
        warnings.simplefilter("ignore", FutureWarning)
        return pd.DataFrame(rows), pd.concat(history, ignore_index=True)


@pytest.mark.parametrize("name, metrics", [
    ("study_case14.toml", {"objective": 10.0, "consensus_residual": 5.0, "max_violation": 0.1}),
    ("study_digits.toml", {"objective": 2.0, "train_cost": 2.0, "test_error": 0.3, "consensus_residual": 1.0,
                           "max_violation": 0.0}),
])
def test_the_grid_studies_figures_fit_their_canvas(name, metrics, tmp_path, checked):
    study = load_study(CASES / name)
    results, history = _grid_tables(study, metrics)
    files = write_figures(results, history, tmp_path, study)
    assert len(checked) >= 5 and files == [f for p in checked for f in (p.name, p.with_suffix(".pdf").name)]


def _total_table(study, metrics: list[str]) -> pd.DataFrame:
    sets = [name for name, _ in study.datasets] or [""]
    methods = list(study.variants) + list(study.anchors)
    return pd.DataFrame([{"dataset": ds, "method": m, "kind": "anchor" if m in study.anchors else "per-round",
                          "total_epsilon": e, **{f"{k}_mean": RNG.lognormal(0, 1) / e for k in metrics},
                          **{f"{k}_se": 0.1 / e for k in metrics}}
                         for ds in sets for m in methods for e in study.epsilons])


@pytest.mark.parametrize("name, metrics, family", [
    ("study_case14_total.toml", ["balance_deviation", "cost_error"], "power"),
    ("study_femnist_total.toml", ["train_cost", "test_error"], "fl"),
])
def test_the_equal_total_figure_fits_its_canvas(name, metrics, family, tmp_path, checked):
    study = load_total_study(CASES / name)
    table = _total_table(study, metrics)
    sets = list(dict.fromkeys(table["dataset"]))
    baselines = {ds: {m: 1e-3 for m in metrics} for ds in sets}
    files = write_total_figure(table, study, baselines, exact=family == "power", out=tmp_path)
    assert files == ["utility_vs_total_epsilon.png", "utility_vs_total_epsilon.pdf"] and len(checked) == 1


def test_the_graph_and_sharing_figures_fit_their_canvas(tmp_path, checked):
    study = load_graph_study(CASES / "study_madmm.toml")
    rounds = np.arange(1, 101)
    curves = pd.concat([pd.DataFrame({"setting": s.label, "round": rounds, "mean": 0.7 * np.exp(-rounds / 30) + 0.3,
                                      "min": 0.28, "max": 1.0, "P": rounds * 0.1}) for s in study.settings])
    runs = pd.DataFrame([{"setting": s.label, "test_error": RNG.uniform(0.05, 0.3)} for s in study.settings
                         for _ in range(3)])
    write_graph_figures(curves, runs, tmp_path, study)
    levels = [0.0, 0.3, 1.0, 3.0, 10.0]
    history = pd.DataFrame([{"noise": s, "epoch": t, "objective": 0.3 + s / t, "test_logloss": 0.3 + s / (10 * t)}
                            for s in levels for t in range(1, 51)])
    write_sharing_figures(history, {"all_features": {"test_logloss": 0.1}, "party1_only": {"test_logloss": 0.4}},
                          0.25, tmp_path, title="study_sharing")
    assert len(checked) >= 5


def test_every_figure_is_a_300_dpi_png_beside_a_pdf(tmp_path):
    from PIL import Image

    study = load_total_study(CASES / "study_case14_total.toml")
    table = _total_table(study, ["balance_deviation", "cost_error"])
    write_total_figure(table, study, {"": {"balance_deviation": 1e-3, "cost_error": 10.0}}, exact=True,
                       out=tmp_path)
    png, pdf = tmp_path / "utility_vs_total_epsilon.png", tmp_path / "utility_vs_total_epsilon.pdf"
    assert pdf.read_bytes().startswith(b"%PDF")
    with Image.open(png) as image:
        assert [round(d) for d in image.info["dpi"]] == [300, 300]
