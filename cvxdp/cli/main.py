"""The ``cvxdp`` command line: cases, run, central, study, privacy (SPEC §8).

Every command takes ``--json`` and then prints exactly one JSON object as the last line of stdout.

Start-up: this module imports only click and the standard library at module level; each command imports
what it needs in its body, so ``--help``, ``--version``, ``cases`` and ``privacy`` never load the modelling
stack (cvxpy, pandas, networkx, pandapower). ``tests/test_startup.py`` checks it.
"""

from __future__ import annotations

import functools
import json
import math
import pickle
import sys
import zlib
from pathlib import Path

import click

from ..config.schema import schema_epilog
from ..errors import CvxdpError


def _emit(payload: dict, as_json: bool, human: str) -> None:
    if as_json:
        from ..run.results import _jsonable  # numpy/pandas: only commands that solve get here with --json

        click.echo(json.dumps(_jsonable(payload)))
    else:
        click.echo(human)


def friendly_errors(func):
    """Turn cvxdp's own errors, OS errors (missing file, disk full, read-only), truncated or corrupt
    compressed files and unpicklable data into one clear line and a non-zero exit status (never click's
    bare "Aborted!", never a traceback)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (CvxdpError, FileNotFoundError) as exc:
            raise click.ClickException(f"{type(exc).__name__}: {exc}") from None
        except OSError as exc:
            from ..run.outdir import describe_oserror

            where = f" ({exc.filename})" if exc.filename else ""
            raise click.ClickException(f"{type(exc).__name__}: {describe_oserror(exc)}{where}") from None
        except (EOFError, zlib.error, pickle.UnpicklingError) as exc:
            raise click.ClickException(f"{type(exc).__name__}: a file is truncated or corrupt ({exc}); "
                                       "check the data and output files named in the command.") from None

    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="cvxdp")
def cli() -> None:
    """cvxdp: constrained, differentially private, distributed convex optimization."""


@cli.command("cases")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@friendly_errors
def cases_cmd(as_json: bool) -> None:
    """List the shipped cases and studies, and the power networks known by name (pandapower, PGLib-OPF)."""
    from ..config.files import load_toml, shipped_cases_dir, shipped_networks

    folder = shipped_cases_dir()
    entries = []
    for path in sorted(folder.glob("*.toml")) if folder else []:
        raw = load_toml(path)
        kind = "study" if "study" in raw else "case"
        desc = raw.get("case", raw.get("study", {})).get("description", "")
        entries.append({"name": path.stem, "kind": kind, "path": str(path), "description": desc})
    entries += shipped_networks()
    human = "\n".join(f"{e['kind']:5s}  {e['name']:24s} {e['description']}" for e in entries) or "no shipped cases"
    click.echo(json.dumps({"cases": entries}) if as_json else human)  # plain strings: no numpy conversion


#: Which mechanisms each algorithm runs (the rest are refused before anything starts).
SUPPORTED_MECHANISMS = {"ladmm": ("none", "ObjL", "ObjG", "OutL", "OutG"), "admm": ("none",),
                        "sharing": ("none", "OutG"), "madmm": ("none", "gamma"), "dvp": ("none", "gamma"),
                        "radmm": ("none", "gamma"), "mradmm": ("none", "gamma")}
_MECH_HELP = "; ".join(f"{a}: {', '.join(m)}" for a, m in SUPPORTED_MECHANISMS.items())


def _load_or_shortcut(case_file, network, zones, objective):
    """A case file, or (``--network NAME --zones N``) an in-memory power case with automatic zones."""
    from ..config.build import load_case
    from ..config.runs import power_case

    if network is None and zones is None:
        if case_file is None:
            raise click.UsageError("Give a CASE_FILE, or --network NAME --zones N for a power case.")
        return load_case(case_file)
    if case_file is not None:
        raise click.UsageError("Give either a CASE_FILE or --network/--zones, not both.")
    if network is None or zones is None:
        raise click.UsageError("--network and --zones go together (e.g. --network case300 --zones 4).")
    return power_case(network, zones, objective=objective)


def _power_lines(summary: dict) -> list[str]:
    """Human lines for a power case: cost in $/h, the objective's definition and the gap to the central optimum."""
    kind = summary.get("objective_kind")
    if kind is None or "cost" not in summary:
        return []
    meaning = ("sum of squared P/Q balance deviations, p.u.^2" if kind == "balance"
               else "generation cost / cost_scale, k$/h, plus any balance penalty")
    lines = [f"  objective ({kind}: {meaning})",
             f"    distributed {summary['zone_objective']:.6g}   central optimum {summary['central_objective']:.6g}"
             f"   gap {summary['objective_gap']:+.4g}"
             + (f" ({100 * summary['relative_gap']:+.3g} %)" if _finite(summary.get("relative_gap")) else
                " (relative gap undefined: the optimum is 0)"),
             f"  generation cost     {summary['cost']:.2f} $/h (central optimum of the '{kind}' objective: "
             f"{summary['central_cost']:.2f} $/h; gap {summary['cost_gap']:+.2f} $/h)",
             f"  balance deviation   {summary['balance_deviation']:.4g} p.u.^2 (sum of squared P/Q mismatches)"]
    if _finite(summary.get("polished_cost")):
        lines.append(f"  polished dispatch   {summary['polished_cost']:.2f} $/h (gap {summary['polished_cost_gap']:+.2f} $/h; "
                     f"round {summary['polished_round']}: feasible, the zones agree on every tie line)")
    if kind == "balance":
        lines.append("  (the balance objective does not price generation: its cost is that of one feasible dispatch, "
                     "not an economic dispatch; `cvxdp central CASE --objective cost` gives the cheapest)")
    return lines + _ac_lines(summary, "the final distributed dispatch")


def _ac_lines(summary: dict, what: str) -> list[str]:
    """The AC check's verdict, numbers with units and tolerances (empty without an AC check)."""
    lines: list[str] = []
    if "ac_feasible" in summary:
        tol = summary["ac_tolerances"]
        verdict = "AC FEASIBLE within tolerances" if summary["ac_feasible"] else "NOT AC feasible"
        lines += [f"  AC check (pandapower runpp of {what}): {verdict}",
                  f"    converged {summary['ac_converged']}; slack P mismatch {summary['ac_slack_p_mw']:.3g} MW "
                  f"(tol {tol['slack_p_mw']:.3g} MW); voltage violation {summary['ac_max_v_violation_pu']:.3g} p.u. "
                  f"(tol {tol['max_v_violation_pu']:g}); gen Q violation {summary['ac_max_q_violation_mvar']:.3g} MVAr "
                  f"(tol {tol['max_q_violation_mvar']:g}); branch overload {summary['ac_max_overload_frac']:.3g} of "
                  f"rate_a (tol {tol['max_overload_frac']:g}); |V_ac - sqrt(w)| {summary['ac_max_vm_dev_pu']:.3g} p.u.",
                  *(f"    - {v}" for v in summary["ac_violations"])]
    return lines


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _num(value, fmt: str) -> str:
    return "n/a" if value is None else format(value, fmt)


def backend_options(func):
    """``--backend serial|ray`` with ``--ray-cpus`` / ``--ray-address`` (override the case's [run] table)."""
    for option in reversed((
            click.option("--backend", type=click.Choice(["serial", "ray"]), default=None,
                         help="Where the agents run: serial (default) or ray (Ray actors, `pip install "
                              "'cvxdp[ray]'`; same seed, same numbers). Overrides [run] backend."),
            click.option("--ray-cpus", type=click.IntRange(min=1), default=None,
                         help="With --backend ray: CPUs of the local Ray instance (default: all)."),
            click.option("--ray-address", default=None,
                         help="With --backend ray: join an existing Ray cluster at this address."))):
        func = option(func)
    return func


def _backend_overrides(backend, ray_cpus, ray_address, current: str | None = None) -> dict:
    """The [run] entries the backend options set; ``current`` is the case's own [run] backend."""
    if (backend or current) != "ray" and (ray_cpus is not None or ray_address is not None):
        raise click.UsageError("--ray-cpus and --ray-address go with --backend ray.")
    return {"backend": backend, "ray_cpus": ray_cpus, "ray_address": ray_address}


def _apply_backend(run: dict, backend, ray_cpus, ray_address) -> None:
    """Override the case's [run] table (``--backend serial`` also drops its ray_* entries)."""
    overrides = _backend_overrides(backend, ray_cpus, ray_address, run.get("backend"))
    if backend == "serial":
        run.pop("ray_cpus", None)
        run.pop("ray_address", None)
    run.update({k: v for k, v in overrides.items() if v is not None})


@cli.command("run", epilog=schema_epilog())
@click.argument("case_file", required=False)
@click.option("--network", default=None, help="Power shortcut without a case file: a pandapower case "
              "(case14, case118, case300, case1354pegase, ...), a bundled PGLib-OPF case (pglib_opf_case14_ieee, "
              "...; see `cvxdp cases`) or a MATPOWER file (*.m, relative to the current directory); needs --zones.")
@click.option("--zones", type=click.IntRange(min=2), default=None, help="With --network: number of automatic zones.")
@click.option("--objective", type=click.Choice(["cost", "balance"]), default=None,
              help="With --network: the power objective (default balance, the private-data objective).")
@click.option("--data", type=click.Path(exists=True, path_type=Path), default=None,
              help="Local data file or directory for the case's [model] path (e.g. a LEAF FEMNIST directory).")
@click.option("--mechanism", type=click.Choice(["none", "ObjL", "ObjG", "OutL", "OutG", "gamma"]), default=None,
              help=f"Privacy mechanism (overrides [privacy] mechanism). Supported per algorithm: {_MECH_HELP}.")
@click.option("--epsilon", type=float, default=None,
              help="Per-step epsilon (or each agent's total with [privacy] calibrate = 'total').")
@click.option("--delta", type=float, default=None, help="Per-step delta for Gaussian noise.")
@click.option("--calibration", type=click.Choice(["analytic", "classic"]), default=None,
              help="Gaussian calibration: analytic (any epsilon) or classic (epsilon < 1); overrides [privacy].")
@click.option("--noise-source", type=click.Choice(["numpy", "opendp"]), default=None,
              help="numpy (default, reproducible, research-grade) or opendp (hardened samplers, not seedable).")
@click.option("--rounds", type=int, default=None, help="Number of rounds T.")
@click.option("--local-updates", type=int, default=None, help="Local updates J per round.")
@click.option("--algorithm", type=click.Choice(list(SUPPORTED_MECHANISMS)), default=None)
@click.option("--seed", type=int, default=None,
              help="Reproducible (research) noise; default: fresh secret OS entropy per run.")
@click.option("--accountant", type=click.Choice(["basic", "rdp", "pld"]), default=None)
@click.option("--ac-check", is_flag=True, help="Power cases: AC power flow (pandapower) of the final distributed "
              "dispatch, with a feasibility verdict and its tolerances.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Directory for the history (default runs/<case>-<algorithm>-<mechanism>[-eps<eps>]-seed<seed>).")
@click.option("--overwrite", is_flag=True, help="Replace a finished run already saved in --out.")
@click.option("--public", "public_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Also write the public release to this directory: no seed, no values computed on private "
                   "data, no local copies (safe to share; see docs/privacy.md, 'What is released').")
@backend_options
@click.option("--progress/--no-progress", default=True, help="Progress bar on stderr.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object as the last line.")
@friendly_errors
def run_cmd(case_file, network, zones, objective, data, mechanism, epsilon, delta, calibration, noise_source, rounds,
            local_updates, algorithm, seed, accountant, ac_check, out, overwrite, public_dir, backend, ray_cpus,
            ray_address, progress, as_json) -> None:
    """One run of CASE_FILE (a path or a shipped case name); prints a summary and saves the history.

    Power cases report the generation cost ($/h), the objective with its definition and the gap to the
    centralized optimum of the same objective (solved once); --ac-check adds an AC power-flow check.
    """
    from ..config.runs import build_instance, default_run_dir, run_case
    from ..errors import OutputError
    from ..run.checkpoint import remove_checkpoint
    from ..run.outdir import OutputLock, prepare_dir
    from ..run.results import RESULT_FILE
    from ..studies.caveats import ledger_caveats, noise_caveats

    case = _load_or_shortcut(case_file, network, zones, objective)
    if objective is not None and network is None:
        raise click.UsageError("--objective applies with --network; edit [model] objective in the case file.")
    if data is not None:
        case.model["path"] = str(data.resolve())
    case = case.with_overrides(
        algorithm={"rounds": rounds, "local_updates": local_updates, "name": algorithm},
        privacy={"mechanism": mechanism, "epsilon": epsilon, "delta": delta, "noise_source": noise_source,
                 "calibration": calibration},
        run={"seed": seed, "accountant": accountant})
    _apply_backend(case.run, backend, ray_cpus, ray_address)
    alg = case.algorithm.get("name", "ladmm")
    mech = case.privacy.get("mechanism", "none")
    if alg in SUPPORTED_MECHANISMS and mech not in SUPPORTED_MECHANISMS[alg]:
        raise click.UsageError(f"--algorithm {alg} runs the mechanisms {', '.join(SUPPORTED_MECHANISMS[alg])}; "
                               f"got {mech!r}.")
    out = out or default_run_dir(case)
    instance = build_instance(case)
    if ac_check and getattr(instance, "ac_check", None) is None:
        raise click.UsageError("--ac-check applies to power cases only.")
    # checkpoints go next to the history: a killed run resumes when the same command is run again
    with OutputLock(prepare_dir(out)):
        if (out / RESULT_FILE).exists() and not overwrite:
            raise OutputError(f"{str(out)!r} already holds a finished run; pass --overwrite to replace it, or "
                              "choose another --out.")
        outcome = run_case(case, instance=instance, progress=progress and sys.stderr.isatty(), checkpoint=out)
        outcome.result.save(out, overwrite=overwrite)
        remove_checkpoint(out)
    if public_dir is not None:
        outcome.result.save(public_dir, public=True, overwrite=overwrite)
    summary = dict(outcome.summary)
    if ac_check:
        summary.update(instance.ac_check(outcome.result))
    sizes = instance.info.get("samples_per_agent") if isinstance(instance.info, dict) else None
    summary["privacy_caveats"] = ledger_caveats(summary.get("privacy"), min(sizes) if sizes else None)
    summary["privacy_caveats"] += noise_caveats(summary.get("noise_magnitude"), outcome.result.solution)
    summary["history"] = str(out)
    if public_dir is not None:
        summary["public"] = str(public_dir)
    priv = summary.get("privacy") or {}
    human = "\n".join([f"case {case.name} ({alg}, {mech}): {summary['rounds']} rounds ({summary['stop_reason']}), "
                       f"{summary['elapsed_s']:.1f} s",
                       f"  objective           {_num(summary['objective'], '.6g')}",
                       f"  consensus residual  {_num(summary['consensus_residual'], '.3e')}",
                       f"  max violation       {_num(summary['max_violation'], '.3e')}",
                       *([f"  polished point      round {summary['polished_round']}, objective "
                          f"{_num(summary.get('polished_objective'), '.6g')} (feasible; the copies agree exactly)"]
                         if summary.get("polished_round") is not None else []),
                       f"  noise magnitude     {_num(summary['noise_magnitude'], '.4g')} (mean ||xi||_2 per update)",
                       *_power_lines(summary),
                       *(f"  {k:19s} {v:.6g}" for k, v in summary.items()
                         if k in ("train_cost", "test_error") and v is not None),
                       f"  privacy (worst agent) {priv}" if priv else "  privacy: none",
                       *(f"  NOT a privacy guarantee: {n}" for n in summary.get("privacy_notes", [])
                         if summary.get("guarantee") is False),
                       *(f"  NOTE: {c}" for c in summary["privacy_caveats"]),
                       f"  history saved to {out}",
                       *([f"  public release saved to {public_dir}"] if public_dir is not None else [])])
    _emit(summary, as_json, human)


@cli.command("central")
@click.argument("case_file", required=False)
@click.option("--network", default=None, help="Power shortcut without a case file: a pandapower case, a bundled "
              "PGLib-OPF case or a MATPOWER file (*.m); needs --zones.")
@click.option("--zones", type=click.IntRange(min=2), default=None, help="With --network: number of automatic zones.")
@click.option("--objective", type=click.Choice(["cost", "balance"]), default=None,
              help="Power cases: the objective of the reference solve (with --network the default is cost).")
@click.option("--time-limit", type=click.FloatRange(min=0, min_open=True), default=300.0, show_default=True,
              help="Seconds each solver of the fallback chain (Clarabel, ECOS, SCS) may run.")
@click.option("--progress/--no-progress", default=True, help="Report each step on stderr.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object as the last line.")
@friendly_errors
def central_cmd(case_file, network, zones, objective, time_limit, progress, as_json) -> None:
    """Centralized reference solve of CASE_FILE (optimal value, solver, time); power cases add an AC check.

    "cost" is the generation cost in $/h; "objective" is in the model's units (cost objective: k$/h).
    A solver that fails is followed by the next one (Clarabel, ECOS, SCS), each capped by --time-limit and
    announced on stderr.
    """
    import time
    import warnings

    from ..config.runs import build_instance
    from ..model.central import SolverFallbackWarning, solve_central

    start = time.perf_counter()

    def report(message: str) -> None:
        if progress:
            click.echo(f"[{time.perf_counter() - start:6.1f} s] {message}", err=True)

    case = _load_or_shortcut(case_file, network, zones, objective or ("cost" if network else None))
    if objective is not None and objective != case.model.get("objective"):
        case.model["objective"] = objective
        case.model.pop("penalty", None)  # the case's weight was chosen for its own objective
    report(f"building {case.name}")
    instance = build_instance(case)
    report(f"{len(instance.agents)} agents built")
    with warnings.catch_warnings(record=True) as fallbacks:
        warnings.simplefilter("always", SolverFallbackWarning)
        if instance.central is not None:
            info = instance.central(time_limit=time_limit, progress=report)
        else:
            ref = solve_central(instance.agents, time_limit=time_limit, progress=report)
            info = {k: ref[k] for k in ("objective", "solver", "status", "time_s")}
    notes = [str(w.message) for w in fallbacks if issubclass(w.category, SolverFallbackWarning)]
    for w in fallbacks:  # everything else goes out as it would have
        if not issubclass(w.category, SolverFallbackWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    for note in notes:
        click.echo(f"WARNING: {note}", err=True)
    if notes:
        info["solver_fallbacks"] = notes
    report("done")
    info = {"case": case.name, **info}
    human = "\n".join(f"{k:24s} {v}" for k, v in info.items() if not isinstance(v, (list, dict)) and v != "")
    ac = _ac_lines(info, "the central SOC set-points")
    if ac:
        human += "\n" + "\n".join(ac)
    _emit(info, as_json, human)


@cli.command("study")
@click.argument("study_file")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Output directory (results table, ledger, figures, report). Re-running resumes.")
@click.option("--rounds", type=int, default=None, help="Override the study's rounds (e.g. a quick look).")
@click.option("--data", type=click.Path(exists=True, path_type=Path), default=None,
              help="Local data for the case's [model] path: a LEAF FEMNIST directory (grid studies), a LIBSVM "
                   "training file (sharing studies) or UCI adult.data (graph studies).")
@click.option("--test-data", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Sharing studies: the matching LIBSVM test file (e.g. a9a.t).")
@backend_options
@click.option("--progress/--no-progress", default=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object as the last line.")
@friendly_errors
def study_cmd(study_file, out, rounds, data, test_data, backend, ray_cpus, ray_address, progress, as_json) -> None:
    """The comparison grid of STUDY_FILE (mechanisms x eps x J x seeds) -> CSV, figures, report.

    A study with ``[study] kind = "sharing"`` runs the ADMM-sharing study instead (noise levels x seeds,
    cvxdp.studies.sharing); --rounds then sets its epochs. A study with ``[study] kind = "graph"`` runs the
    decentralized-ADMM study (settings x runs, cvxdp.studies.graph); --data/--test-data then give the UCI Adult
    files (adult.data / adult.test) instead of the bundled data.
    """
    from ..studies.graph import is_graph_study, run_graph_study
    from ..studies.grid import run_study
    from ..studies.sharing import is_sharing_study, run_sharing_study

    run = _backend_overrides(backend, ray_cpus, ray_address)
    if is_sharing_study(study_file):
        info = run_sharing_study(study_file, out, epochs=rounds, data=data, test_data=test_data,
                                 progress=progress and sys.stderr.isatty(), run=run)
    elif is_graph_study(study_file):  # [study] kind = "graph": M-ADMM/PP/DVP/R-ADMM/MR-ADMM (cvxdp.studies.graph)
        info = run_graph_study(study_file, out, rounds=rounds, data=data, test_data=test_data,
                               progress=progress and sys.stderr.isatty(), run=run)
    elif test_data is not None:
        raise click.UsageError("--test-data applies to sharing and graph studies only.")
    else:
        info = run_study(study_file, out, rounds=rounds, progress=progress, data=data, run=run)
    human = f"study done: {info['runs']} runs ({info['computed']} computed, {info['reused']} reused) -> {out}\n" \
            + "\n".join(f"  {f}" for f in info["files"])
    _emit(info, as_json, human)


def _register_optional() -> None:
    try:
        from .privacy_cmd import privacy
    except ImportError:  # pragma: no cover
        return
    cli.add_command(privacy)
    try:
        from .audit_cmd import audit
    except ImportError:  # pragma: no cover
        return
    cli.add_command(audit)


_register_optional()


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
    """A warning on the command line: its category and message, without Python's file, line and source line."""
    print(f"warning ({category.__name__}): {message}", file=file if file is not None else sys.stderr)


def main() -> None:
    """The ``cvxdp`` console script (``python -m cvxdp.cli.main`` too)."""
    import warnings

    warnings.showwarning = _show_warning
    cli()


if __name__ == "__main__":  # pragma: no cover
    main()
