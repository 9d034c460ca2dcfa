"""What the solving commands do (``cvxdp run``, ``central``, ``study``): loaded by :mod:`cvxdp.cli.main` only when
one of them runs, so ``--help`` and the light commands never load the modelling stack."""

from __future__ import annotations

import pickle
import sys
import time
import warnings
from pathlib import Path
from typing import NoReturn

import click

from ..config.build import (
    Case,
    build_instance,
    central_reference,
    default_run_dir,
    load_case,
    power_case,
    run_case,
)
from ..errors import CvxdpError, OutputError, SolverFallbackWarning
from ..federation.launch import LocalFederation, require_flower, submit
from ..federation.parties import write_parties, write_plan
from ..federation.serve import describe_ledger, serve_party
from ..run import (
    PUBLIC_ASSUMPTION,
    RESULT_FILE,
    OutputLock,
    checkpoint_path,
    load_result,
    prepare_dir,
    remove_checkpoint,
)
from ..studies import ledger_caveats, noise_caveats, study_class, study_kinds
from .common import apply_backend, backend_overrides, emit, finite, num, rounded

#: Keys of ``Result.summary()`` computed on the agents' private data (``cvxdp run`` groups them under
#: :data:`~cvxdp.model.EVALUATION_LABEL`; ``summary["evaluation"]["keys"]`` lists them in its JSON)
EVALUATION_SUMMARY_KEYS = ("objective", "max_violation", "noise_magnitude", "polished_objective", "solution_violation",
                           "solver_time")
#: Keys of a case run's summary that describe the run rather than measure it
SUMMARY_CONTEXT = ("case", "mechanism", "epsilon", "local_updates", "seed", "elapsed_s")
#: Summary entries that are released values, accounting or bookkeeping (never evaluation)
NOT_EVALUATION = ("objective_kind", *SUMMARY_CONTEXT)


def _load_or_shortcut(case_file, network, zones, objective, algorithm=None):
    """A case file, or (``--network NAME --zones N``) an in-memory power case with automatic zones."""
    if network is None and zones is None:
        if case_file is None:
            raise click.UsageError("Give a CASE_FILE, or --network NAME --zones N for a power case.")
        return load_case(case_file)
    if case_file is not None:
        raise click.UsageError("Give either a CASE_FILE or --network/--zones, not both.")
    if network is None or zones is None:
        raise click.UsageError("--network and --zones go together (e.g. --network case300 --zones 4).")
    return power_case(network, zones, objective=objective, algorithm=algorithm)


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
             + (f" ({100 * summary['relative_gap']:+.3g} %)" if finite(summary.get("relative_gap")) else
                " (relative gap undefined: the optimum is 0)"),
             f"  generation cost     {summary['cost']:.2f} $/h "
             + (f"(central optimum of the '{kind}' objective: {summary['central_cost']:.2f} $/h; gap "
                f"{summary['cost_gap']:+.2f} $/h)" if finite(summary.get("cost_gap")) else
                "(not the objective here, so not compared with an optimum)"),
             f"  balance deviation   {summary['balance_deviation']:.4g} p.u.^2 (sum of squared P/Q mismatches)"]
    if finite(summary.get("polished_cost")):
        gap = (f"gap {summary['polished_cost_gap']:+.2f} $/h; " if finite(summary.get("polished_cost_gap"))
               else "")
        lines.append(f"  polished dispatch   {summary['polished_cost']:.2f} $/h ({gap}"
                     f"round {summary['polished_round']}: feasible, the zones agree on every tie line)")
    if kind == "balance":
        lines.append("  (the balance objective does not price generation: its cost is that of one feasible dispatch, "
                     "not an economic dispatch, so no cost gap is reported; the central balance optimum's dispatch "
                     f"costs {summary['central_cost']:.2f} $/h and `cvxdp central CASE --objective cost` gives the "
                     "cheapest)")
    return lines + _ac_lines(summary, "the final distributed dispatch")


def _ac_table(points: dict, diagnosis: str) -> list[str]:
    """The AC check of the central SOC optimum, the distributed point and the polished point side by side."""
    names = list(points)
    rows = [("verdict", lambda p: "feasible" if p.get("feasible") else "NOT feasible"),
            ("slack P mismatch MW", lambda p: f"{abs(p['slack_p_mw']):.3g}"),
            ("voltage violation p.u.", lambda p: f"{p['max_v_violation_pu']:.3g}"),
            ("gen Q violation MVAr", lambda p: f"{p['max_q_violation_mvar']:.3g}"),
            ("branch overload of rate_a", lambda p: f"{p['max_overload_frac']:.3g}")]

    def cell(p: dict, fn) -> str:
        try:
            return fn(p) if p.get("converged") or fn is rows[0][1] else "n/a"
        except (KeyError, TypeError, ValueError):
            return "n/a"

    lines = ["  AC check side by side (pandapower runpp from each point's set-points)",
             "    " + f"{'':26s}" + "".join(f"{n:>14s}" for n in names)]
    lines += ["    " + f"{label:26s}" + "".join(f"{cell(points[n], fn):>14s}" for n in names) for label, fn in rows]
    return lines + [f"    verdict: {diagnosis}"]


def _ac_lines(summary: dict, what: str) -> list[str]:
    """The AC check's verdict, numbers with units and tolerances (empty without an AC check)."""
    lines: list[str] = []
    if "ac_points" in summary:
        lines += _ac_table(summary["ac_points"], summary["ac_diagnosis"])
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


def _case(case_file, network, zones, objective, data, mechanism, epsilon, delta, calibration, noise_source, rounds,
          local_updates, algorithm, seed, accountant) -> Case:
    """The case of a ``run`` or ``federate`` command, with the command's overrides."""
    case = _load_or_shortcut(case_file, network, zones, objective, algorithm)
    if objective is not None and network is None:
        raise click.UsageError("--objective applies with --network; edit [model] objective in the case file.")
    if data is not None:
        case = case.with_data(data)
    case = case.with_overrides(
        algorithm={"rounds": rounds, "local_updates": local_updates, "name": algorithm},
        privacy={"mechanism": mechanism, "epsilon": epsilon, "delta": delta, "noise_source": noise_source,
                 "calibration": calibration},
        run={"seed": seed, "accountant": accountant})
    alg = case.algorithm.get("name", "ladmm")
    mech = case.privacy.get("mechanism", "none")
    accepted = case.accepted_mechanisms()
    if mech not in accepted:
        raise click.UsageError(f"--algorithm {alg} runs the mechanisms {', '.join(accepted)}; got {mech!r}.")
    return case


def _checkpointed(out: Path) -> str:
    """What a rerun resumes from: the round of the checkpoint in ``out``."""
    try:
        with open(checkpoint_path(out), "rb") as fh:
            saved = pickle.load(fh)["loop"].t
    except Exception:  # noqa: BLE001 - no checkpoint yet (or unreadable): the rerun says so itself
        return "no round was checkpointed yet, so it starts afresh"
    return f"from the checkpoint of round {saved}"


def _interrupted(where: str, resume: str) -> NoReturn:
    """Ctrl-C: one line saying where the run stopped and how to resume it (not click's bare "Aborted!")."""
    click.echo(f"interrupted {where}; run the same command again to resume ({resume}).", err=True)
    raise SystemExit(130)  # the shell's status for a SIGINT


def run_task(case_file, network, zones, objective, data, mechanism, epsilon, delta, calibration, noise_source, rounds,
             local_updates, algorithm, seed, accountant, ac_check, out, overwrite, public_dir, backend, ray_cpus,
             ray_address, progress, as_json) -> None:
    """``cvxdp run`` (see its help in :mod:`cvxdp.cli.main`)."""
    case = _case(case_file, network, zones, objective, data, mechanism, epsilon, delta, calibration, noise_source,
                 rounds, local_updates, algorithm, seed, accountant)
    apply_backend(case.run, backend, ray_cpus, ray_address)
    alg = case.algorithm.get("name", "ladmm")
    mech = case.privacy.get("mechanism", "none")
    out = out or default_run_dir(case)
    instance = build_instance(case)
    if ac_check and getattr(instance, "ac_check", None) is None:
        raise click.UsageError("--ac-check applies to power cases only.")
    # checkpoints go next to the history: a killed run resumes when the same command is run again
    with OutputLock(prepare_dir(out)):
        if (out / RESULT_FILE).exists() and not overwrite:
            raise OutputError(f"{str(out)!r} already holds a finished run; pass --overwrite to replace it, or "
                              "choose another --out.")
        done = [0]  # the last round completed (a Ctrl-C names it)
        try:
            outcome = run_case(case, instance=instance, progress=progress and sys.stderr.isatty(), checkpoint=out,
                               callback=lambda t, row: done.__setitem__(0, t))
        except KeyboardInterrupt:
            _interrupted(f"at round {done[0] + 1}", _checkpointed(out))
        outcome.result.save(out, overwrite=overwrite)
        remove_checkpoint(out)
    if public_dir is not None:
        outcome.result.save(public_dir, public=True, overwrite=overwrite)
    summary = dict(outcome.summary)
    checked = instance.ac_check(outcome.result) if ac_check else {}
    summary.update(checked)
    sizes = instance.info.get("samples_per_agent") if isinstance(instance.info, dict) else None
    summary["privacy_caveats"] = ledger_caveats(summary.get("privacy"), min(sizes) if sizes else None)
    summary["privacy_caveats"] += noise_caveats(summary.get("noise_magnitude"), outcome.result.solution)
    summary["history"] = str(out)
    if public_dir is not None:
        summary["public"] = str(public_dir)
    # which values of the summary were computed on the agents' private data (never released): the run's evaluation
    # columns, the solution's violation, the template's metrics and the AC check
    template_keys = set(checked) | (set(outcome.summary) - set(outcome.result.summary()))
    label = outcome.result.config["evaluation"]["label"]  # the run's own (cvxdp.model.EVALUATION_LABEL)
    summary["evaluation"] = {"label": label, "keys": sorted(
        k for k in summary if (k in EVALUATION_SUMMARY_KEYS or k in template_keys) and k not in NOT_EVALUATION)}
    priv = summary.get("privacy") or {}
    notes = (outcome.result.privacy or {}).get("notes", [])
    assumed = [n for n in notes if not n["voids"] and n["reason"].startswith(PUBLIC_ASSUMPTION)]
    polished = summary.get("polished_round") is not None
    evaluation = [f"    objective           {num(summary['objective'], '.6g')}" if "objective" in summary else None,
                  f"    max violation       {num(summary['max_violation'], '.3e')}"
                  if "max_violation" in summary else None,
                  *([f"    polished objective  {num(summary.get('polished_objective'), '.6g')} (round "
                     f"{summary['polished_round']}; feasible, the copies agree exactly)"] if polished else []),
                  f"    noise magnitude     {num(summary['noise_magnitude'], '.4g')} (mean ||xi||_2 per update)"
                  if "noise_magnitude" in summary else None,
                  f"    solution violation  {num(summary['solution_violation'], '.3e')} (distance of the solution "
                  "to the agents' feasible sets, public by assumption)" if "solution_violation" in summary else None,
                  *("  " + line for line in _power_lines(summary)),
                  *(f"    {k:19s} {v:.6g}" for k, v in summary.items()
                    if k in ("train_cost", "test_error") and v is not None)]
    evaluation = [line for line in evaluation if line is not None]
    human = "\n".join([f"case {case.name} ({alg}, {mech}): {summary['rounds']} rounds ({summary['stop_reason']}), "
                       f"{summary['elapsed_s']:.1f} s",
                       f"  consensus residual  {num(summary['consensus_residual'], '.3e')} (released)",
                       *([f"  polished point      round {summary['polished_round']} (the mean of the released "
                          "copies)"] if polished else []),
                       f"  privacy (worst agent, epsilon or (epsilon, delta) per accountant) {rounded(priv)}" if priv
                       else "  privacy: none",
                       *(f"  NOT a privacy guarantee: {n['reason']}" for n in notes if n["voids"]),
                       *([f"  the guarantee relies on {len(assumed)} public assumption(s) (ledger notes "
                          "'Public assumption: ...' in result.json; docs/what-is-public.md)"] if assumed else []),
                       *([f"  {label}, computed on the agents' private data:", *evaluation]
                         if evaluation else []),
                       *(f"  NOTE: {c}" for c in summary["privacy_caveats"]),
                       f"  history saved to {out}",
                       *([f"  public release saved to {public_dir} (released values only: no evaluation)"]
                         if public_dir is not None else [])])
    emit(summary, as_json, human)


def central_task(case_file, network, zones, objective, data, time_limit, progress, as_json) -> None:
    """``cvxdp central``."""
    start = time.perf_counter()

    def report(message: str) -> None:
        if progress:
            click.echo(f"[{time.perf_counter() - start:6.1f} s] {message}", err=True)

    case = _load_or_shortcut(case_file, network, zones, objective or ("cost" if network else None))
    if objective is not None and objective != case.model.get("objective"):
        case.model["objective"] = objective
        case.model.pop("penalty", None)  # the case's weight was chosen for its own objective
    if data is not None:  # the same [model] path override as `cvxdp run --data`
        case = case.with_data(data)
    report(f"building {case.name}")
    instance = build_instance(case)
    report(f"{len(instance.agents)} agents built")
    with warnings.catch_warnings(record=True) as fallbacks:
        warnings.simplefilter("always", SolverFallbackWarning)
        info = central_reference(instance, time_limit=time_limit, progress=report)
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
    human = "\n".join(f"{k:24s} {rounded(v, 6)}" for k, v in info.items()
                      if not isinstance(v, (list, dict)) and v != "")
    ac = _ac_lines(info, "the central SOC set-points")
    if ac:
        human += "\n" + "\n".join(ac)
    emit(info, as_json, human)


def study_task(study_file, out, rounds, data, test_data, backend, ray_cpus, ray_address, workers, progress,
               as_json) -> None:
    """``cvxdp study``."""
    run = backend_overrides(backend, ray_cpus, ray_address)
    try:
        info = _study(study_file, out, rounds, data, test_data, run, progress, workers)
    except KeyboardInterrupt:
        _interrupted("during the study", f"its finished runs in {out} are kept and not run again")
    human = f"study done: {info['runs']} runs ({info['computed']} computed, {info['reused']} reused) -> {out}\n" \
            + "\n".join(f"  {f}" for f in info["files"])
    emit(info, as_json, human)


def _study(study_file, out, rounds, data, test_data, run, progress, workers=None) -> dict:
    """Run a study file of any kind: its class (by ``[study] kind``) says which options it takes."""
    cls = study_class(study_file)
    given = {"workers": workers, "test_data": test_data, "rounds": rounds}
    for option, value in given.items():
        if value is not None and option not in cls.options:
            raise click.UsageError(_refused(option, cls))
    bar = progress and (cls.bar_without_terminal or sys.stderr.isatty())
    return cls.load(study_file).run(out, progress=bar, run=run, data=data,
                                    **{k: v for k, v in given.items() if k in cls.options})


def _refused(option: str, cls: type) -> str:
    """Why ``option`` does not apply to a study of ``cls``'s kind (the kinds that take it named)."""
    takers = [c.title for c in study_kinds() if option in c.options]
    others = [c.title for c in study_kinds() if option not in c.options]
    flag = "--" + option.replace("_", "-")
    if option == "workers":
        return (f"{flag} applies to {' and '.join(takers)} studies only ({' and '.join(others)} studies run their "
                "cells one after another).")
    if option == "rounds":
        return f"{flag} does not apply to a{'n' if cls.title[0] in 'aeiou' else ''} {cls.title} study ({cls.no_rounds})."
    return f"{flag} applies to {' and '.join(takers)} studies only."


def parties_task(case_file, network, zones, objective, data, mechanism, epsilon, delta, calibration, noise_source,
                 rounds, local_updates, algorithm, seed, accountant, out, budget_epsilon, budget_delta,
                 report_feasibility, as_json) -> None:
    """``cvxdp parties``."""
    case = _case(case_file, network, zones, objective, data, mechanism, epsilon, delta, calibration, noise_source,
                 rounds, local_updates, algorithm, seed, accountant)
    budget = None if budget_epsilon is None else (budget_epsilon, budget_delta)
    files = write_parties(case, out, seed=seed, budget=budget, report_feasibility=report_feasibility)
    policy = case.privacy.get("mechanism", "none")
    info = {"case": case.name, "policy": case.privacy, "parties": [str(f) for f in files]}
    emit(info, as_json, f"{len(files)} party files for {case.name} (each party's policy: {policy}):\n"
         + "\n".join(f"  {f}" for f in files))


def party_task(party_file, superlink, root_certificates, auth_key, insecure, port, ledger, as_json) -> None:
    """``cvxdp party``: runs the party (its SuperNode and its own executor) until it is stopped; with ``--ledger``
    prints its lifetime ledger instead."""
    if ledger:
        report = describe_ledger(party_file)
        emit(report, as_json, _ledger_text(report))
        return
    if superlink is None:
        raise click.UsageError("Give --superlink HOST:PORT (the coordinator's SuperLink), or --ledger.")
    require_flower()
    if not insecure and root_certificates is None:
        raise click.UsageError("Give --root-certificates (the SuperLink's CA), or --insecure for a test on one "
                               "machine (plain HTTP).")
    if insecure:
        click.echo("warning: --insecure: plain HTTP, no TLS (a test on one machine only)", err=True)
    raise SystemExit(serve_party(party_file, superlink, port=port, root_certificates=root_certificates,
                                 auth_key=auth_key, insecure=insecure, say=lambda line: click.echo(line)))


def _ledger_text(report: dict) -> str:
    budget = report["budget"]
    lines = [f"lifetime ledger of data set {report['dataset']!r} ({report['accountant']}): budget "
             + ("none" if budget is None else f"({budget[0]:g}, {budget[1]:g})")]
    for agent, row in report["agents"].items():
        spent = row["spent"]
        lines.append(f"  {agent}: {row['releases']} releases ({row['calls']} calls) in {len(row['runs'])} run(s); "
                     f"spent basic ({spent['basic'][0]:.4g}, {spent['basic'][1]:.3g}), rdp {spent['rdp'][0]:.4g}, "
                     f"pld {spent['pld'][0]:.4g} at delta {spent['pld'][1]:.3g}")
    for row in report["budget_history"]:
        lines.append(f"  {row['time']}: budget {row['budget']} ({row['accountant']})")
    for note in report["notes"]:
        lines.append(f"  note: {note['reason']}")
    return "\n".join(lines)


def federate_task(case_file, network, zones, objective, data, mechanism, epsilon, delta, calibration, noise_source,
                  rounds, local_updates, algorithm, seed, accountant, local, superlink, parties, root_certificates,
                  tls, auth, insecure, party_budget_epsilon, party_budget_delta, timeout, wait, out, as_json) -> None:
    """``cvxdp federate``: the coordinator's side of a federation (and, with --local, the parties' too)."""
    require_flower()
    if local == (superlink is not None):
        raise click.UsageError("Give --local (everything on this machine) or --superlink HOST:PORT.")
    if not local and (tls or auth or party_budget_epsilon is not None):
        raise click.UsageError("--tls, --auth and --party-budget-* apply with --local (a real party sets its own).")
    case = _case(case_file, network, zones, objective, data, mechanism, epsilon, delta, calibration, noise_source,
                 rounds, local_updates, algorithm, seed, accountant)
    out = Path(out or str(default_run_dir(case)) + "-federated")
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    if local:
        if not tls and not auth:
            click.echo("note: --local runs plain HTTP on 127.0.0.1 (pass --tls or --auth to try them)", err=True)
        budget = None if party_budget_epsilon is None else (party_budget_epsilon, party_budget_delta)
        instance = build_instance(case)
        names = [a.name for a in instance.agents]
        files = write_parties(case, out / "parties", instance=instance, seed=case.run.get("seed"), budget=budget)
    else:
        if not parties:
            raise click.UsageError("--superlink needs --parties NAME,NAME,... (the agents in the run's order).")
        if not insecure and root_certificates is None:
            raise click.UsageError("Give --root-certificates (the SuperLink's CA), or --insecure (plain HTTP; a "
                                   "test on one machine only).")
        names = [n.strip() for n in parties.split(",") if n.strip()]
    plan = write_plan(case, out / "plan.json", parties=names, agents=names, out=out, checkpoint=out / "checkpoint",
                      timeout=timeout, wait=wait)
    longest = wait + timeout * (int(case.algorithm.get("rounds", 100)) + 5)
    say = (lambda line: click.echo(f"coordinator: {line}", err=True))  # noqa: E731 - one line per event
    try:  # Ctrl-C: a local SuperLink and its parties stop with the context; the checkpoints stay
        if local:
            with LocalFederation(files, out / "federation", tls=tls, auth=auth) as fed:
                status = fed.run(plan, timeout=longest, say=say)
        else:
            status = submit(superlink, plan, root_certificates=root_certificates, insecure=insecure,
                            timeout=longest, say=say)
    except KeyboardInterrupt:
        _interrupted("during the federation", _checkpointed(out / "checkpoint"))
    if status["status"] != "done":
        raise CvxdpError(status.get("error", "the federation failed"))
    result = load_result(out / "result")
    summary = {"case": case.name, "mode": "federation", "mechanism": case.privacy.get("mechanism", "none"),
               "epsilon": case.privacy.get("epsilon"), "local_updates": case.algorithm.get("local_updates", 1),
               "seed": case.run.get("seed"), **result.summary(), "elapsed_s": time.perf_counter() - start,
               "parties": result.config.get("party_reports"), "stopped_by": result.config.get("stopped_by"),
               "result": str(out / "result")}
    priv = summary.get("privacy") or {}
    human = "\n".join([f"federation {case.name} ({case.algorithm.get('name', 'ladmm')}, "
                       f"{case.privacy.get('mechanism', 'none')}): {summary['rounds']} rounds "
                       f"({summary['stop_reason']}), {summary['elapsed_s']:.1f} s",
                       f"  consensus residual  {num(summary.get('consensus_residual'), '.3e')} (released)",
                       f"  privacy (worst agent, epsilon or (epsilon, delta) per accountant) {rounded(priv)}" if priv
                       else "  privacy: none",
                       *([f"  stopped by party {summary['stopped_by']['party']!r}'s own budget"]
                         if summary.get("stopped_by") else []),
                       f"  public result saved to {out / 'result'} (released values only; each party keeps its own "
                       "evaluation)"])
    emit(summary, as_json, human)
