"""The ADMM-sharing study (Hu et al. 2020, Figs. 1-3): noise levels x seeds over one vertical case.

A study file names a case of the ``vertical`` template and the grid::

    [study]
    kind = "sharing"
    case = "sharing_breast_cancer.toml"   # relative to the study file
    noise_levels = [0.0, 0.3, 1.0, 3.0]   # sigma of N(0, sigma^2 I_N) on every D_m x_m; 0 = non-private
    seeds = [0, 1, 2]
    epochs = 60
    delta = 1e-5                          # the per-epoch delta of the privacy claims
    rho_n = 0.25                          # optional: rho = rho_n / N_train (the loss is a mean over samples)
    [model]                               # optional overrides of the case's [model] (e.g. a LIBSVM path)

``cvxdp study STUDY.toml --out DIR`` (or :func:`run_sharing_study`) writes into ``DIR``:

    results.csv      one row per (noise level, seed): final / best test log-loss, epochs to converge,
                     sensitivity C, per-epoch epsilon (Theorem 1 and analytic), totals (Corollary 1, basic,
                     RDP, PLD)
    summary.csv      the same, averaged over seeds, one row per noise level, beside both baselines
    histories.csv    every epoch of every run: training objective, test log-loss, noise, privacy so far
    baselines.json   scikit-learn on all features / on party 1's features, the centralized optimum
    figure_objective_logloss.png   (a) training objective, (b) test log-loss per epoch (paper Figs. 1-2)
    figure_noise_test_logloss.png  test log-loss per epoch at each noise level and both baselines (Fig. 3)
    report.md
    runs/<cell>/     one saved Result per (noise level, seed) (:mod:`cvxdp.studies.cells`): a rerun skips the
                     finished cells, resumes an interrupted one and refuses a changed study

Noise levels are given as sigma, as in the paper's Fig. 3; each level's privacy claim is computed from
Lemma 1 / Theorem 1 (and our accountants) and reported beside it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from ..config.build import (
    StudyBackends,
    build_instance,
    load_case,
    load_toml,
    settings_context,
)
from ..families.sharing.params import ADMMSharing, SharingGaussian, theorem1_epsilon
from ..families.solve import solve
from ..run import jsonable
from .figures import sharing_study_figures
from .study import (
    CellJob,
    Study,
    StudyKey,
    cell_config,
    head_keys,
    is_int_at_least,
    number_list,
    register_study,
)


def _positive(below_one: bool = False) -> Callable[[Any], bool]:
    """None or a positive float (``below_one``: below 1)."""
    high = 1.0 if below_one else math.inf
    return lambda v: v is None or (not isinstance(v, bool) and isinstance(v, (int, float)) and 0 < v < high)


def is_sharing_study(path: str | Path) -> bool:
    """Whether ``path`` is a study file with ``[study] kind = "sharing"``."""
    try:
        raw = load_toml(path)
    except Exception:  # noqa: BLE001 - the regular study loader reports a bad file
        return False
    return isinstance(raw.get("study"), dict) and raw["study"].get("kind") == "sharing"


def load_sharing_study(path: str | Path) -> dict[str, Any]:
    """Load and check a sharing study file; returns its resolved settings (:attr:`SharingStudy.spec`)."""
    return SharingStudy.load(path).spec


# --------------------------------------------------------------------------- metrics of a history
def epochs_to_gap(objective: np.ndarray, optimum: float, tol: float) -> int | None:
    """First epoch whose training objective is within relative ``tol`` of the centralized optimum."""
    gap = (np.asarray(objective) - optimum) / abs(optimum)
    hits = np.flatnonzero(gap <= tol)
    return int(hits[0]) + 1 if hits.size else None


def settle_epoch(values: np.ndarray, tol: float, tail: int = 5) -> int | None:
    """First epoch from which ``values`` stay within relative ``tol`` of their final level (mean of the last
    ``tail`` epochs); None when the last epoch itself is outside (no settled level)."""
    v = np.asarray(values, dtype=float)
    if v.size == 0 or not np.all(np.isfinite(v)):
        return None
    final = float(np.mean(v[-tail:]))
    inside = np.abs(v - final) <= tol * abs(final)
    if not inside[-1]:
        return None
    outside = np.flatnonzero(~inside)
    return int(outside[-1]) + 2 if outside.size else 1


def first_below(values: np.ndarray, level: float) -> int | None:
    """First epoch whose value is at most ``level`` (None if none is)."""
    hits = np.flatnonzero(np.asarray(values, dtype=float) <= level)
    return int(hits[0]) + 1 if hits.size else None


# --------------------------------------------------------------------------- the study
@register_study
class SharingStudy(Study):
    """A loaded ``kind = "sharing"`` study file (see the module docstring); :attr:`spec` holds its settings."""

    kind: ClassVar[str] = "sharing"
    title: ClassVar[str] = "sharing"
    schema_table: ClassVar[str] = "[study] sharing (kind = sharing)"
    keys: ClassVar[tuple[StudyKey, ...]] = (
        *head_keys("sharing"),
        StudyKey("noise_levels", "list of float >= 0", "required", "sigma values of the noise (0 = non-private)",
                 parse=number_list("noise_levels", float, positive=False, convert=True)),
        StudyKey("seeds", "list of int", "[0]", "seeds", value=[0],
                 parse=number_list("seeds", int, positive=False)),
        StudyKey("epochs", "int >= 1", "the case's", "epochs (`--rounds` overrides)", expected="an int in [1, inf)",
                 accepts=is_int_at_least(1, optional=True)),
        StudyKey("delta", "float in (0, 1)", "1e-5", "delta at which each sigma's epsilon is reported", value=1e-5,
                 expected="a positive float below 1", accepts=_positive(below_one=True)),
        StudyKey("rho_n", "float > 0", "-", "rho * N_train (rho then scales with the data)",
                 expected="a positive float", accepts=_positive()),
        StudyKey("settle_tol", "float > 0", "0.02", "relative change that counts as settled", value=0.02,
                 expected="a positive float", accepts=_positive()),
        StudyKey("gap_tol", "float > 0", "1e-3", "relative gap to the optimum that counts as converged", value=1e-3,
                 expected="a positive float", accepts=_positive()),
        StudyKey("accountant", "str", "pld", "accountant of the reported totals", value="pld"),
    )
    sections: ClassVar[frozenset[str]] = frozenset({"model", "algorithm"})
    options: ClassVar[frozenset[str]] = frozenset({"rounds", "data", "test_data"})
    rank: ClassVar[int] = 2
    label: ClassVar[str] = "sharing study"
    writes_ledger: ClassVar[bool] = False

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.path, self.name, self.case_path = spec["path"], spec["name"], spec["case_path"]

    @classmethod
    def load(cls, path: str | Path) -> SharingStudy:
        path, raw, values, case_path = cls.read(path)
        return cls({"path": path, "name": str(values["name"] or path.stem), "description": values["description"],
                    "case_path": case_path, "noise_levels": values["noise_levels"], "seeds": values["seeds"],
                    "epochs": values["epochs"], "delta": float(values["delta"]), "rho_n": values["rho_n"],
                    "settle_tol": float(values["settle_tol"]), "gap_tol": float(values["gap_tol"]),
                    "accountant": values["accountant"], "model": dict(raw.get("model", {})),
                    "algorithm": dict(raw.get("algorithm", {}))})

    # --------------------------------------------------------------------------- hooks
    def prepare(self, out: Path, stack: contextlib.ExitStack, *, rounds: int | None = None,
                data: str | Path | None = None, test_data: str | Path | None = None, run: dict | None = None,
                **options: Any) -> list[CellJob]:
        """The baselines (``baselines.json``) and a cell per noise level and seed (one seed when non-private)."""
        study = self.spec
        self.started = time.perf_counter()
        case = load_case(study["case_path"])
        model = {**case.model, **study["model"]}
        if data is not None:
            model.update(dataset="libsvm", path=str(Path(data).resolve()),
                         test_path=None if test_data is None else str(Path(test_data).resolve()))
            model.setdefault("blocks", "auto")
        case.model = model
        placement = {**case.run, **{k: v for k, v in (run or {}).items() if v is not None}}
        algo = {**case.algorithm, **study["algorithm"]}
        lam = float(algo.get("lam", 1e-3))
        T = int(rounds or study["epochs"] or algo.get("epochs", 50))
        instance = build_instance(case)
        self.vdata = instance.info["data"]
        N = self.vdata.n_samples
        rho = float(study["rho_n"]) / N if study["rho_n"] is not None else float(algo.get("rho", 0.25 / N))
        self.baselines = instance.info["baselines"](lam)  # the template's hooks: sklearn baselines, central optimum
        central = instance.central(lam=lam)
        self.f_star = float(central["objective"])
        self.base_info = {"all_features": {k: v for k, v in self.baselines["all_features"].items() if k != "coef"},
                          "party1_only": {k: v for k, v in self.baselines["party1_only"].items() if k != "coef"},
                          "central": {k: v for k, v in central.items() if k != "solution"},
                          "data": self.vdata.info, "rho": rho, "lam": lam, "epochs": T, "samples": N}
        (out / "baselines.json").write_text(json.dumps(jsonable(self.base_info), indent=2))
        self.described = {"study": str(self.path), "case": case.to_dict(), "epochs": T, "rho": rho}
        context, _ = settings_context(case, instance)
        backends = stack.enter_context(StudyBackends())  # Ray, if asked for, starts once for every cell
        self.movable = False  # the cells share the study's instance and backends
        self.grid, jobs = [], []
        for sigma in study["noise_levels"]:
            for seed in study["seeds"] if sigma > 0 else study["seeds"][:1]:  # the non-private run is deterministic
                # the paper's Fig. 3: Lemma 1 claims (a paper preset, recorded as such in every ledger)
                privacy = SharingGaussian(sigma=sigma, delta=study["delta"], sensitivity="paper",
                                          calibration="classic", assumptions="record") if sigma > 0 else None
                alg = ADMMSharing(rho=rho, lam=lam, epochs=T, loss="logistic")
                config = {"case": cell_config(case), "algorithm": alg.describe(),
                          "privacy": privacy.describe() if privacy is not None else None, "seed": int(seed),
                          "accountant": study["accountant"]}
                self.grid.append((sigma, int(seed), privacy))
                jobs.append(CellJob(f"noise{sigma:g}_seed{int(seed)}", config, functools.partial(
                    _sharing_cell, instance, alg, privacy, int(seed), study["accountant"], backends, placement),
                    context))
        return jobs

    def row(self, index: int, result: Any, summary: dict[str, Any]) -> tuple[dict, pd.DataFrame, Any]:
        sigma, seed, privacy = self.grid[index]
        study, h = self.spec, result.history.assign(noise=sigma, seed=seed)
        row: dict[str, Any] = {
            "noise": sigma, "seed": seed, "epochs": int(len(h)),
            "final_objective": float(h["objective"].iloc[-1]),
            "final_test_logloss": float(h["test_logloss"].iloc[-1]),
            "best_test_logloss": float(h["test_logloss"].min()),
            "final_test_error": float(h["test_error"].iloc[-1]),
            "epochs_to_gap": epochs_to_gap(h["objective"].values, self.f_star, study["gap_tol"]),
            "epochs_to_settle": settle_epoch(h["test_logloss"].values, study["settle_tol"]),
            "epochs_to_baseline": first_below(h["test_logloss"].values, (1 + study["settle_tol"])
                                              * self.baselines["all_features"]["test_logloss"]),
            "seconds": summary["seconds"]}
        if privacy is not None:
            row.update(_privacy_columns(result.privacy, self.vdata.names[0], sigma, study["delta"]))
        return row, h, None

    def report(self, results: pd.DataFrame, history: pd.DataFrame, out: Path) -> list[str]:
        """``summary.csv``, the figures and ``report.md``."""
        self.summary = summarize(results, self.baselines)
        self.summary.to_csv(out / "summary.csv", index=False)
        files = ["results.csv", "summary.csv", "histories.csv", "baselines.json"]
        files += write_sharing_figures(history, self.baselines, self.f_star, out, title=self.name)
        files.append(write_sharing_report(self.spec, results, self.summary, self.base_info, out,
                                          seconds=time.perf_counter() - self.started))
        return files

    def info(self) -> dict[str, Any]:
        return {"summary": jsonable(self.summary.to_dict(orient="records"))}


def _sharing_cell(instance: Any, alg: ADMMSharing, privacy: SharingGaussian | None, seed: int, accountant: str,
                  backends: StudyBackends, placement: dict, cell_dir: Path) -> tuple[Any, dict[str, Any]]:
    """One run of the sharing study (its objective and test loss are labelled private evaluation: asked for on any
    backend)."""
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Assumption 1.1 warnings: recorded in the history instead
        res = solve(instance.agents, algorithm=alg, privacy=privacy, seed=seed, accountant=accountant,
                    checkpoint=cell_dir, backend=backends(placement), evaluate=True)
    return res, {"seconds": time.perf_counter() - t0}


def _privacy_columns(privacy: dict[str, Any], first: str, sigma: float, delta: float) -> dict[str, Any]:
    """A private run's privacy columns: party 1's sensitivity and per-epoch claims, the worst party's totals."""
    mech = privacy["mechanism"]["parties"]
    C = mech[first]["sensitivity"]
    return {"sensitivity_C": C, "eps_step_theorem1": theorem1_epsilon(C, sigma, delta),
            "eps_step_claim": mech[first]["eps_step"], "eps_total_corollary1": privacy["corollary1"]["worst"][0],
            "eps_total_basic": privacy["worst"]["basic"][0], "eps_total_rdp": privacy["worst"]["rdp"],
            "eps_total_pld": privacy["worst"]["pld"], "target_delta": privacy["target_delta"],
            "assumption_1_1_held": privacy["assumption_1_1"]["held"]}


def run_sharing_study(path: str | Path, out: str | Path, *, epochs: int | None = None,
                      data: str | Path | None = None, test_data: str | Path | None = None,
                      progress: bool = False, run: dict | None = None) -> dict[str, Any]:
    """Run the sharing study of ``path`` and write its tables, figures and report into ``out``
    (:meth:`SharingStudy.run`).

    Parameters
    ----------
    path : str or Path
        The study file (``[study] kind = "sharing"``).
    out : str or Path
        Output directory (created).
    epochs : int, optional
        Override the study's number of epochs.
    data, test_data : path, optional
        A local LIBSVM training (and test) file to use instead of the case's data set, e.g. a9a / a9a.t or
        gisette_scale / gisette_scale.t; the paper's column split is chosen from the feature count
        (123 -> 66 + 57, 5000 -> 2000 + 2000 + 1000) unless the study's [model] sets ``blocks``.
    progress : bool
        A progress bar over the runs.
    run : dict, optional
        Overrides of the case's [run] entries (None values ignored), e.g. ``{"backend": "ray"}``.

    Returns
    -------
    dict
        ``{"study", "out", "runs", "files", "summary": [...one dict per noise level...]}``.
    """
    return SharingStudy.load(path).run(out, rounds=epochs, data=data, test_data=test_data, progress=progress, run=run)


def summarize(results: pd.DataFrame, baselines: dict[str, dict]) -> pd.DataFrame:
    """One row per noise level: means over seeds, beside both baselines' test log-loss."""
    agg = {"final_test_logloss": "mean", "best_test_logloss": "mean", "final_test_error": "mean",
           "final_objective": "mean", "epochs_to_settle": "max", "epochs_to_gap": "max",
           "epochs_to_baseline": "max", "seed": "count"}
    for col in ("sensitivity_C", "eps_step_theorem1", "eps_step_claim", "eps_total_corollary1", "eps_total_rdp",
                "eps_total_pld"):
        if col in results:
            agg[col] = "max"
    summary = results.groupby("noise", as_index=False).agg(agg).rename(columns={"seed": "runs"})
    summary["all_features_test_logloss"] = baselines["all_features"]["test_logloss"]
    summary["party1_only_test_logloss"] = baselines["party1_only"]["test_logloss"]
    summary["beats_party1_only"] = summary["final_test_logloss"] < summary["party1_only_test_logloss"]
    return summary


def write_sharing_figures(history: pd.DataFrame, baselines: dict[str, dict], f_star: float, out: Path, *,
                          title: str) -> list[str]:
    """The paper's layout (:func:`cvxdp.studies.figures.sharing_study_figures`)."""
    return sharing_study_figures(history, baselines, f_star, out, title=title)


def _fmt(v: Any, spec: str = ".4f") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, (float, np.floating)) and (abs(v) >= 1e5 or math.isinf(v)):
        return "inf" if math.isinf(v) else f"{v:.2e}"
    if isinstance(v, (int, np.integer)) or (isinstance(v, float) and float(v).is_integer() and spec == "d"):
        return str(int(v))
    return format(v, spec)


def write_sharing_report(study: dict, results: pd.DataFrame, summary: pd.DataFrame, base: dict, out: Path, *,
                         seconds: float) -> str:
    """``report.md``: test log-loss of sharing vs party-1-only vs all features per noise level, epochs to
    converge, and the privacy each noise level buys under Theorem 1 / Corollary 1 and our accountants."""
    af, p1, cen = base["all_features"], base["party1_only"], base["central"]
    data = base["data"]
    lines = [f"# Study {study['name']}: ADMM sharing over vertically partitioned features", "",
             f"Data: {data['dataset']}, {data['n_train']} training / {data['n_test']} test samples, "
             f"{data['features']} features split {' + '.join(map(str, data['blocks']))} over "
             f"{len(data['blocks'])} parties (rows normalised per party: {data['normalize']}). "
             f"rho = {base['rho']:.4g}, lambda = {base['lam']:g}, {base['epochs']} epochs, seeds {study['seeds']}. "
             f"Whole study: {seconds:.1f} s.", "",
             "## Baselines (scikit-learn LogisticRegression, same l2 weight, no intercept)", "",
             "| model | test log loss | test error |", "|---|---|---|",
             f"| all features (centralized) | {af['test_logloss']:.4f} | {af['test_error']:.4f} |",
             f"| party 1's features only | {p1['test_logloss']:.4f} | {p1['test_error']:.4f} |",
             f"| centralized optimum (CVXPY, objective {cen['objective']:.6f}) | {cen['test_logloss']:.4f} | - |",
             "", "## ADMM sharing per noise level (mean over seeds)", "",
             "| sigma | final test log loss | best | test error | vs party 1 only | vs all features | "
             f"epochs to settle (±{study['settle_tol']:.0%}) | epochs to within {study['settle_tol']:.0%} of all "
             f"features | epochs to objective gap <= {study['gap_tol']:g} |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in summary.itertuples():
        lines.append(f"| {r.noise:g} | {r.final_test_logloss:.4f} | {r.best_test_logloss:.4f} | "
                     f"{r.final_test_error:.4f} | {r.final_test_logloss - p1['test_logloss']:+.4f} | "
                     f"{r.final_test_logloss - af['test_logloss']:+.4f} | {_fmt(r.epochs_to_settle, 'd')} | "
                     f"{_fmt(r.epochs_to_baseline, 'd')} | {_fmt(r.epochs_to_gap, 'd')} |")
    better = summary[summary["beats_party1_only"]]["noise"].tolist()
    worse = summary[~summary["beats_party1_only"]]["noise"].tolist()
    lines += ["", f"Sharing beat the party-1-only baseline at sigma in {better or 'none'}"
              + (f" and did not at sigma in {worse}." if worse else "."), ""]
    priv = summary[summary["noise"] > 0]
    if len(priv) and "sensitivity_C" in priv:
        lines += ["## What each noise level certifies (per party, worst party)", "",
                  "**Paper preset: reproduces the published figure; not a privacy guarantee for this model** "
                  "(Lemma 1's sensitivity and Corollary 1; the ledgers record guarantee = false). The sound "
                  "default is SharingGaussian(sensitivity='worst_case'). Seeded runs are for research, not "
                  "release.", "",
                  f"Lemma 1 sensitivity C (party 1) = {priv['sensitivity_C'].iloc[0]:.4g}; per-epoch delta = "
                  f"{study['delta']:g}; totals over {base['epochs']} epochs at delta = "
                  f"{results['target_delta'].dropna().iloc[0]:.3g} (Corollary 1's T delta + delta').", "",
                  "| sigma | eps/epoch, Theorem 1 formula | eps/epoch claimed | total, Corollary 1 | total, RDP | "
                  "total, PLD | Assumption 1.1 held (runs) |", "|---|---|---|---|---|---|---|"]
        for r in priv.itertuples():
            held = results[results["noise"] == r.noise]["assumption_1_1_held"]
            lines.append(f"| {r.noise:g} | {_fmt(r.eps_step_theorem1, '.3g')} | {_fmt(r.eps_step_claim, '.3g')} | "
                         f"{_fmt(r.eps_total_corollary1, '.3g')} | {_fmt(r.eps_total_rdp, '.3g')} | "
                         f"{_fmt(r.eps_total_pld, '.3g')} | {int(held.sum())} of {len(held)} |")
        lines += ["", "Theorem 1's formula is a valid claim only when it is <= 1; above that the claimed per-epoch "
                  "epsilon is the analytic Gaussian one (Balle & Wang). PLD is not run for noise multipliers "
                  "below 0.05 ('-').",
                  "Caveats: Lemma 1's C scales like 1/rho and the loss here is a mean over samples, so rho ~ 1/N "
                  "and C is large; Assumption 1.1 also asks ||z|| <= b1, and ||z|| grows like sqrt(N). The noise "
                  "levels at which the model stays useful therefore certify no meaningful epsilon under the "
                  "paper's analysis. Lemma 1 is also not a valid bound in general (see "
                  "tests/audits/test_sharing.py: a neighbouring pair whose release moves 1.6 C).", ""]
    (out / "report.md").write_text("\n".join(lines))
    return "report.md"


__all__ = ["SharingStudy", "epochs_to_gap", "first_below", "is_sharing_study", "load_sharing_study", "run_sharing_study", "settle_epoch",
           "summarize", "write_sharing_figures", "write_sharing_report"]
