"""Studies of the decentralized algorithms (papers 000 and 001): curves of the papers' figures, resumable.

A graph study file has ``[study] kind = "graph"`` (``cvxdp study`` dispatches here), names a base case (an
``erm`` case) and lists settings, each run ``runs`` times (seeds 0..runs-1)::

    [study]
    kind = "graph"
    name = "study_madmm"
    case = "erm_madmm.toml"
    runs = 10
    rounds = 100
    metric = "average_loss"          # the curve: the papers' L(t)

    [[setting]]
    label = "DVP, alpha = 3"
    panel = "alpha3"                 # a figure (a list puts the setting in several)
    algorithm = { name = "dvp", theta = 0.5 }
    privacy = { mechanism = "gamma", alpha = 3.0 }

    [[setting]]
    label = "ADMM (matched)"
    algorithm = { name = "dvp", theta = 1.0 }
    privacy = { mechanism = "gamma" }
    match_bound = "MR-ADMM, alpha = 1"   # alpha chosen so that the final bound equals that setting's

    [[comparison]]                   # a claim of the papers, checked with the numbers in the report
    better = "PP, alpha(1) = 3"
    than = "DVP, alpha = 3"

A setting's ``algorithm`` table replaces the base case's (only the base's graph keys, init_scale and
local_solver are kept); its ``privacy`` table replaces the base's.

Layout of ``--out DIR``: ``runs/<setting>/seed<k>/`` (one saved Result each; ``result.json`` last, so an
interrupted study resumes), ``runs.csv`` (one row per run: final metrics, test error, bounds),
``curves.csv`` (per setting and iteration: mean, min and max of the metric over runs, ``P(t)``),
``histories.csv``, ``<metric>_<panel>.png`` (mean curve with min-max bars, the papers' layout),
``privacy_<panel>.png`` (P(t)), ``test_error.png`` and ``report.md``.
"""

from __future__ import annotations

import contextlib
import functools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from ..config.build import (
    StudyBackends,
    build_instance,
    load_case,
    load_toml,
    make_algorithm,
    make_privacy,
    run_case,
    settings_context,
)
from ..errors import ConfigError
from ..families.graph.mechanism import alpha_for_bound, privacy_plan
from .figures import graph_study_figures
from .study import CellJob, Study, StudyKey, cell_config, head_keys, is_int_at_least, register_study

__all__ = ["GraphStudy", "Setting", "is_graph_study", "load_graph_study", "run_graph_study"]

_SETTING_KEYS = {"label", "panel", "algorithm", "privacy", "runs", "match_bound"}
_COMPARISON_KEYS = {"better", "than", "claim"}
_KEEP_FROM_BASE = ("graph", "edges", "graph_seed", "edge_prob", "init_scale", "local_solver")
METRICS = ("average_loss", "objective", "max_deviation", "consensus_residual")
#: axis labels: definition and unit of each metric (the papers' L(t) is the average logistic loss)
METRIC_LABELS = {"average_loss": "average loss L(t): mean over nodes of the regularised logistic loss [nats]",
                 "objective": "objective sum_i O(f_i, D_i) [nats]",
                 "max_deviation": "max_i ||f_i - mean f|| (consensus deviation) [parameter units]",
                 "consensus_residual": "consensus residual [parameter units]"}


@dataclass
class Setting:
    label: str
    panels: list[str]
    algorithm: dict[str, Any]
    privacy: dict[str, Any]
    runs: int | None = None
    match_bound: str | None = None

    @property
    def slug(self) -> str:
        return re.sub(r"[^A-Za-z0-9]+", "_", self.label).strip("_") or "setting"

    @property
    def private(self) -> bool:
        return self.privacy.get("mechanism", "none") != "none"


def _metric(value: Any, path: Path) -> str:
    if value not in METRICS:
        raise ConfigError(f"{path}: the 'metric' entry of [study] must be one of {', '.join(map(repr, METRICS))}. "
                          f"Got {value!r} instead.")
    return value


@register_study
@dataclass
class GraphStudy(Study):
    """A loaded ``kind = "graph"`` study file (see the module docstring)."""

    kind: ClassVar[str] = "graph"
    title: ClassVar[str] = "graph"
    schema_table: ClassVar[str] = "[study] graph (kind = graph)"
    keys: ClassVar[tuple[StudyKey, ...]] = (
        *head_keys("graph"),
        StudyKey("runs", "int >= 1", "10", "repetitions per setting", value=10, expected="an int in [1, inf)",
                 accepts=is_int_at_least(1)),
        StudyKey("rounds", "int >= 1", "the case's", "iterations", expected="an int in [1, inf)",
                 accepts=is_int_at_least(1, optional=True)),
        StudyKey("metric", "str", "average_loss", "metric plotted and compared", value="average_loss", parse=_metric),
        StudyKey("bar_every", "int >= 1", "auto", "spacing of the error bars", expected="an int in [1, inf)",
                 accepts=is_int_at_least(1, optional=True)),
    )
    sections: ClassVar[frozenset[str]] = frozenset({"setting", "comparison"})
    options: ClassVar[frozenset[str]] = frozenset({"rounds", "data", "test_data"})
    rank: ClassVar[int] = 3
    label: ClassVar[str] = "graph study"
    results_file: ClassVar[str] = "runs.csv"
    writes_ledger: ClassVar[bool] = False

    path: Path
    name: str
    description: str
    case_path: Path
    runs: int
    rounds: int | None
    metric: str
    bar_every: int | None
    settings: list[Setting]
    comparisons: list[dict[str, str]] = field(default_factory=list)

    def setting(self, label: str) -> Setting:
        for s in self.settings:
            if s.label == label:
                return s
        raise ConfigError(f"{self.path}: no [[setting]] labelled {label!r}.")

    @classmethod
    def load(cls, path: str | Path) -> GraphStudy:
        """Load and check a graph study file (see the module docstring)."""
        path, raw, values, case_path = cls.read(path)
        settings = _settings(raw.get("setting"), path)
        return cls(path, str(values["name"] or path.stem), str(values["description"]), case_path, values["runs"],
                   values["rounds"], values["metric"], values["bar_every"], settings,
                   _comparisons(raw.get("comparison", []) or [], {s.label for s in settings}, path))

    # --------------------------------------------------------------------------- hooks
    def prepare(self, out: Path, stack: contextlib.ExitStack, *, rounds: int | None = None, runs: int | None = None,
                data: str | Path | None = None, test_data: str | Path | None = None, run: dict | None = None,
                **options: Any) -> list[CellJob]:
        base = load_case(self.case_path)
        base.run.update({k: v for k, v in (run or {}).items() if v is not None})
        if data is not None:
            base.model.update({"dataset": "adult", "path": str(Path(data).resolve()),
                               "test_path": str(Path(test_data).resolve()) if test_data is not None else None})
        elif test_data is not None:
            raise ConfigError("test_data needs data (the Adult training file).")
        self.rounds_run = rounds = rounds or self.rounds
        self.instance = instance = build_instance(base)
        self.alphas: dict[str, float] = {}
        for s in self.settings:
            if s.match_bound is not None and s.label not in self.alphas:
                _matched_alpha(instance, base, self, s, rounds, self.alphas)
        self.described = {"study": str(self.path), "case": base.to_dict(), "rounds": rounds,
                          "matched_alpha": self.alphas}
        self.pairs = [(s, r) for s in self.settings for r in range(runs or s.runs or self.runs)]
        context, _ = settings_context(base, instance)
        backends = stack.enter_context(StudyBackends())  # Ray, if asked for, starts once for every cell
        self.movable = False  # the cells share the study's instance and backends
        jobs = []
        for setting, seed in self.pairs:
            case = _setting_case(base, setting, rounds, seed, self.alphas.get(setting.label))
            jobs.append(CellJob(f"{setting.slug}/seed{seed}", cell_config(case),
                                functools.partial(_graph_cell, instance, case, backends), context))
        return jobs

    def row(self, index: int, result: Any, summary: dict[str, Any]) -> tuple[dict, pd.DataFrame, Any]:
        setting, seed = self.pairs[index]
        priv = result.privacy or {}
        worst = priv.get("worst", {}) if setting.private else {}
        test_error = self.instance.test_error(np.asarray(result.solution["f"])) \
            if hasattr(self.instance, "test_error") else summary.get("test_error")
        hist = result.history
        row = {"setting": setting.label, "seed": seed, "algorithm": setting.algorithm["name"],
               "private": setting.private, "alpha": self.alphas.get(setting.label, setting.privacy.get("alpha")),
               "iterations": int(len(hist)), self.metric: float(hist[self.metric].iloc[-1]),
               "test_error": test_error, "max_deviation": float(hist["max_deviation"].iloc[-1]),
               "bound": priv.get("paper_bound") if setting.private else None,
               "eps_rdp": worst.get("rdp"), "eps_pld": worst.get("pld"), "wall_time": float(hist["wall_time"].sum())}
        cols = ["round", "iteration", self.metric, "objective", "max_deviation", "noise_magnitude"] + \
            (["bound_P"] if "bound_P" in hist else [])
        return row, hist[[c for c in cols if c in hist]].assign(setting=setting.label, seed=seed), None

    def report(self, results: pd.DataFrame, history: pd.DataFrame, out: Path) -> list[str]:
        """``curves.csv``, the figures and ``report.md``."""
        curves = _curves(history, self.metric)
        curves.to_csv(out / "curves.csv", index=False)
        files = ["runs.csv", "histories.csv", "curves.csv"] + write_graph_figures(curves, results, out, self)
        self.verdicts = compare(results, self)
        files.append(write_graph_report(results, curves, self.verdicts, out, self, self.rounds_run, self.alphas))
        return files

    def info(self) -> dict[str, Any]:
        return {"comparisons": self.verdicts}


def _graph_cell(instance: Any, case: Any, backends: StudyBackends, cell_dir: Path) -> tuple[Any, dict]:
    """Run one setting's run on the study's instance, checkpointed into ``cell_dir``."""
    outcome = run_case(case, instance=instance, checkpoint=cell_dir, backend=backends(case.run))
    return outcome.result, outcome.summary


def is_graph_study(path: str | Path) -> bool:
    """Whether ``path`` is a study file with ``[study] kind = "graph"``."""
    raw = load_toml(path)
    return isinstance(raw.get("study"), dict) and raw["study"].get("kind") == "graph"


def _pos_int(value: Any, key: str, where: str, path: Path) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{path}: the '{key}' entry of {where} must be an int in [1, inf). Got {value!r} instead.")
    return value


def _settings(raw_settings: Any, path: Path) -> list[Setting]:
    """The ``[[setting]]`` tables, checked."""
    if not isinstance(raw_settings, list) or not raw_settings:
        raise ConfigError(f"{path}: a graph study needs at least one [[setting]].")
    settings, labels = [], set()
    for k, s in enumerate(raw_settings):
        where = f"[[setting]] {k + 1}"
        unknown = sorted(set(s) - _SETTING_KEYS)
        if unknown:
            raise ConfigError(f"{path}: unknown key(s) {', '.join(map(repr, unknown))} in {where}. "
                              f"Allowed: {', '.join(sorted(_SETTING_KEYS))}.")
        label = s.get("label")
        if not isinstance(label, str) or not label or label in labels:
            raise ConfigError(f"{path}: {where} needs a unique non-empty 'label'. Got {label!r}.")
        labels.add(label)
        algo = s.get("algorithm")
        if not isinstance(algo, dict) or "name" not in algo:
            raise ConfigError(f"{path}: {where} ({label!r}) needs an 'algorithm' table with a 'name'.")
        priv = s.get("privacy", {"mechanism": "none"})
        if not isinstance(priv, dict):
            raise ConfigError(f"{path}: the 'privacy' entry of {where} must be a table.")
        panels = s.get("panel", "main")
        panels = [panels] if isinstance(panels, str) else list(panels)
        match = s.get("match_bound")
        if match is not None and priv.get("mechanism", "none") == "none":
            raise ConfigError(f"{path}: {where} ({label!r}) has match_bound but no privacy mechanism.")
        settings.append(Setting(label, panels, dict(algo), dict(priv),
                                _pos_int(s["runs"], "runs", where, path) if "runs" in s else None, match))
    for s in settings:
        if s.match_bound is not None and s.match_bound not in labels:
            raise ConfigError(f"{path}: setting {s.label!r} matches the bound of {s.match_bound!r}, which is not "
                              "a setting label.")
    return settings


def _comparisons(raw: list, labels: set[str], path: Path) -> list[dict[str, str]]:
    """The ``[[comparison]]`` tables, checked against the setting labels."""
    comparisons = []
    for k, c in enumerate(raw):
        unknown = sorted(set(c) - _COMPARISON_KEYS)
        if unknown or "better" not in c or "than" not in c:
            raise ConfigError(f"{path}: [[comparison]] {k + 1} needs 'better' and 'than' (setting labels) and "
                              "optionally 'claim'.")
        for key in ("better", "than"):
            if c[key] not in labels:
                raise ConfigError(f"{path}: [[comparison]] {k + 1}: {c[key]!r} is not a setting label.")
        comparisons.append(dict(c))
    return comparisons


def load_graph_study(path: str | Path) -> GraphStudy:
    """Load and check a graph study file (:meth:`GraphStudy.load`)."""
    return GraphStudy.load(path)


def _setting_case(base: Any, setting: Setting, rounds: int | None, seed: int, alpha: float | None) -> Any:
    case = base.with_overrides(run={"seed": seed})
    algo = {k: v for k, v in base.algorithm.items() if k in _KEEP_FROM_BASE}
    algo.update(setting.algorithm)
    if rounds is not None:
        algo["rounds"] = rounds
    case.algorithm = algo
    case.privacy = dict(setting.privacy)
    if alpha is not None:
        case.privacy["alpha"] = alpha
    return case


def _planned_bound(instance: Any, case: Any) -> float:
    return float(privacy_plan(make_algorithm(case.algorithm), instance.agents, make_privacy(case.privacy))
                 .sum().max())


def _matched_alpha(instance: Any, base: Any, study: GraphStudy, setting: Setting, rounds: int | None,
                   cache: dict[str, float]) -> float:
    """The constant alpha at which ``setting``'s planned bound equals its ``match_bound`` setting's."""
    ref = study.setting(setting.match_bound)
    ref_alpha = None
    if ref.match_bound is not None:
        ref_alpha = _matched_alpha(instance, base, study, ref, rounds, cache)
    target = _planned_bound(instance, _setting_case(base, ref, rounds, 0, ref_alpha))
    case1 = _setting_case(base, setting, rounds, 0, 1.0)
    case2 = _setting_case(base, setting, rounds, 0, 2.0)
    algo = make_algorithm(case1.algorithm)
    p1 = privacy_plan(algo, instance.agents, make_privacy(case1.privacy)).sum()
    p2 = privacy_plan(algo, instance.agents, make_privacy(case2.privacy)).sum()
    slope = p2 - p1
    alpha = alpha_for_bound(target, [[(float(p1[n] - slope[n]), float(slope[n]))] for n in p1.index])
    cache[setting.label] = alpha
    return alpha


def run_graph_study(path: str | Path, out: str | Path, *, rounds: int | None = None, runs: int | None = None,
                    data: str | Path | None = None, test_data: str | Path | None = None,
                    progress: bool = True, run: dict | None = None) -> dict[str, Any]:
    """Run (or resume) a graph study and write its tables, figures and report into ``out``.

    Parameters
    ----------
    path : str or Path
        The study file (``[study] kind = "graph"``).
    out : str or Path
        Output directory (created; re-running resumes from the finished runs in it).
    rounds, runs : int, optional
        Override the study's iterations and runs per setting (e.g. a quick look).
    data, test_data : path, optional
        Local UCI Adult files (adult.data, adult.test): the base case then uses ``dataset = "adult"`` with the
        papers' preprocessing instead of its bundled data set.
    progress : bool
        Progress bar on stderr.
    run : dict, optional
        Overrides of the case's [run] entries (None values ignored), e.g. ``{"backend": "ray"}``.

    Returns
    -------
    dict
        ``{"study", "out", "runs", "computed", "reused", "files", "comparisons"}``.
    """
    return GraphStudy.load(path).run(out, rounds=rounds, runs=runs, data=data, test_data=test_data,
                                     progress=progress, run=run)


def _curves(history: pd.DataFrame, metric: str) -> pd.DataFrame:
    grp = history.groupby(["setting", "round"], sort=False)
    curves = grp[metric].agg(["mean", "min", "max"]).reset_index()
    curves["range"] = curves["max"] - curves["min"]
    if "bound_P" in history:
        curves["P"] = grp["bound_P"].max().values
    return curves


# --------------------------------------------------------------------------- figures
def write_graph_figures(curves: pd.DataFrame, runs: pd.DataFrame, out: Path, study: GraphStudy) -> list[str]:
    """The study's figures (:func:`cvxdp.studies.figures.graph_study_figures`)."""
    return graph_study_figures(curves, runs, out, study, metric_label=METRIC_LABELS[study.metric])


# --------------------------------------------------------------------------- report
def _final(runs: pd.DataFrame, label: str, metric: str) -> dict[str, float]:
    sub = runs[runs["setting"] == label]
    bound = sub["bound"].dropna()
    return {"mean": float(sub[metric].mean()), "range": float(sub[metric].max() - sub[metric].min()),
            "test_error": float(sub["test_error"].mean()) if sub["test_error"].notna().any() else math.nan,
            "bound": float(bound.max()) if len(bound) else math.nan, "runs": int(len(sub))}


def compare(runs: pd.DataFrame, study: GraphStudy) -> list[dict[str, Any]]:
    """Each [[comparison]]: did ``better`` reach a lower mean final metric at an equal or lower bound?"""
    verdicts = []
    for c in study.comparisons:
        a, b = _final(runs, c["better"], study.metric), _final(runs, c["than"], study.metric)
        bound_ok = not (a["bound"] > b["bound"] * (1 + 1e-6)) if not math.isnan(b["bound"]) else True
        verdicts.append({"better": c["better"], "than": c["than"], "claim": c.get("claim", ""),
                         f"{study.metric}_better": a["mean"], f"{study.metric}_than": b["mean"],
                         "range_better": a["range"], "range_than": b["range"],
                         "test_error_better": a["test_error"], "test_error_than": b["test_error"],
                         "bound_better": a["bound"], "bound_than": b["bound"],
                         "more_accurate": bool(a["mean"] < b["mean"]), "bound_not_higher": bool(bound_ok),
                         "holds": bool(a["mean"] < b["mean"] and bound_ok)})
    return verdicts


def _fmt(x: Any) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def write_graph_report(runs: pd.DataFrame, curves: pd.DataFrame, verdicts: list[dict[str, Any]], out: Path,
                       study: GraphStudy, rounds: int | None, alphas: dict[str, float]) -> str:
    """A markdown report: per-setting finals (mean, range, test error, bounds) and each comparison's verdict."""
    m = study.metric
    lines = [f"# Study {study.name}", "", study.description, "",
             f"Base case `{study.case_path.name}`; {rounds if rounds else 'the case file`s'} iterations; runs per "
             "setting as listed "
             "(seeds 0..runs-1). Curves: mean over runs with min-max bars; P(t) is the papers' privacy bound "
             "((26) for M-ADMM/DVP, (32) for R-ADMM/MR-ADMM); eps_pld / eps_rdp are our accountants' totals of "
             "the same pure-DP steps at delta = target_delta. Both are conditional: the bounds assume the "
             "exact minimiser of the perturbed primal problem, which the runs solve to a tolerance (see each "
             "ledger's notes). Seeded runs are for research, not release.", "",
             f"| setting | runs | final {m} mean | range | test error mean | min-max | bound P(T) | eps_pld | alpha |",
             "|---|---|---|---|---|---|---|---|---|"]
    for s in study.settings:
        sub = runs[runs["setting"] == s.label]
        if not len(sub):
            continue
        f = _final(runs, s.label, m)
        te = sub["test_error"]
        alpha = alphas.get(s.label, s.privacy.get("alpha"))
        lines.append(f"| {s.label} | {f['runs']} | {_fmt(f['mean'])} | {_fmt(f['range'])} | {_fmt(f['test_error'])} "
                     f"| {_fmt(float(te.min()))}-{_fmt(float(te.max()))} | {_fmt(f['bound'])} | "
                     f"{_fmt(sub['eps_pld'].max() if sub['eps_pld'].notna().any() else None)} | "
                     f"{_fmt(alpha) if s.private else '-'} |")
    if alphas:
        lines += ["", "Matched noise levels (alpha chosen so that the final bound equals the referenced setting's): "
                  + "; ".join(f"{k}: alpha = {v:.4g} (matches {study.setting(k).match_bound!r})"
                              for k, v in alphas.items()) + "."]
    if verdicts:
        lines += ["", "## The papers' claims, checked", "",
                  f"| better | than | {m}: better vs than | range | test error | bound: better vs than | holds |",
                  "|---|---|---|---|---|---|---|"]
        for v in verdicts:
            lines.append(f"| {v['better']} | {v['than']} | {_fmt(v[f'{m}_better'])} vs {_fmt(v[f'{m}_than'])} | "
                         f"{_fmt(v['range_better'])} vs {_fmt(v['range_than'])} | "
                         f"{_fmt(v['test_error_better'])} vs {_fmt(v['test_error_than'])} | "
                         f"{_fmt(v['bound_better'])} vs {_fmt(v['bound_than'])} | {'yes' if v['holds'] else 'no'} |")
        held = sum(v["holds"] for v in verdicts)
        lines += ["", f"{held} of {len(verdicts)} comparisons hold (lower mean final {m} at an equal or lower "
                  "privacy bound)."]
        for v in verdicts:
            if not v["holds"]:
                why = [] if v["more_accurate"] else [f"its mean final {m} was not lower"]
                if not v["bound_not_higher"]:
                    why.append("its bound was higher")
                lines.append(f"- Not held: {v['better']} vs {v['than']}: {' and '.join(why)}.")
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return "report.md"
