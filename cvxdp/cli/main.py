"""The ``cvxdp`` command line: cases, run, central, study, privacy (SPEC §8).

Every command takes ``--json`` and then prints exactly one JSON object as the last line of stdout.
"""

from __future__ import annotations

import functools
import json
import pickle
import sys
import zlib
from pathlib import Path

import click

from ..errors import CvxdpError
from ..results import _jsonable


def _emit(payload: dict, as_json: bool, human: str) -> None:
    if as_json:
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
            from ..outdir import describe_oserror

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
    """List the shipped cases and studies."""
    from ..config import load_toml, shipped_cases_dir

    folder = shipped_cases_dir()
    entries = []
    for path in sorted(folder.glob("*.toml")) if folder else []:
        raw = load_toml(path)
        kind = "study" if "study" in raw else "case"
        desc = raw.get("case", raw.get("study", {})).get("description", "")
        entries.append({"name": path.stem, "kind": kind, "path": str(path), "description": desc})
    human = "\n".join(f"{e['kind']:5s}  {e['name']:24s} {e['description']}" for e in entries) or "no shipped cases"
    _emit({"cases": entries}, as_json, human)


@cli.command("run")
@click.argument("case_file")
@click.option("--mechanism", type=click.Choice(["none", "ObjL", "ObjG", "OutL", "OutG"]), default=None,
              help="Privacy mechanism (overrides [privacy] mechanism).")
@click.option("--epsilon", type=float, default=None, help="Per-step epsilon (or total with budget='total').")
@click.option("--delta", type=float, default=None, help="Per-step delta for Gaussian noise.")
@click.option("--noise-source", type=click.Choice(["numpy", "opendp"]), default=None,
              help="numpy (default, reproducible, research-grade) or opendp (hardened samplers, not seedable).")
@click.option("--rounds", type=int, default=None, help="Number of rounds T.")
@click.option("--local-updates", type=int, default=None, help="Local updates J per round.")
@click.option("--algorithm", type=click.Choice(["ladmm", "admm", "sharing", "madmm", "dvp", "radmm", "mradmm"]), default=None)
@click.option("--seed", type=int, default=None)
@click.option("--accountant", type=click.Choice(["basic", "rdp", "pld"]), default=None)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Directory for the history (default runs/<case>-<mechanism>-<seed>).")
@click.option("--overwrite", is_flag=True, help="Replace a finished run already saved in --out.")
@click.option("--progress/--no-progress", default=True, help="Progress bar on stderr.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object as the last line.")
@friendly_errors
def run_cmd(case_file, mechanism, epsilon, delta, noise_source, rounds, local_updates, algorithm, seed, accountant, out,
            overwrite, progress, as_json) -> None:
    """One run of CASE_FILE (a path or a shipped case name); prints a summary and saves the history."""
    from ..checkpoint import remove_checkpoint
    from ..config import load_case
    from ..errors import OutputError
    from ..outdir import OutputLock, prepare_dir
    from ..results import RESULT_FILE
    from ..runs import run_case

    case = load_case(case_file).with_overrides(
        algorithm={"rounds": rounds, "local_updates": local_updates, "name": algorithm},
        privacy={"mechanism": mechanism, "epsilon": epsilon, "delta": delta, "noise_source": noise_source},
        run={"seed": seed, "accountant": accountant})
    mech = case.privacy.get("mechanism", "none")
    out = out or Path("runs") / f"{case.name}-{mech}-seed{case.run.get('seed', 0)}"
    # checkpoints go next to the history: a killed run resumes when the same command is run again
    with OutputLock(prepare_dir(out)):
        if (out / RESULT_FILE).exists() and not overwrite:
            raise OutputError(f"{str(out)!r} already holds a finished run; pass --overwrite to replace it, or "
                              "choose another --out.")
        outcome = run_case(case, progress=progress and sys.stderr.isatty(), checkpoint=out)
        outcome.result.save(out, overwrite=overwrite)
        remove_checkpoint(out)
    summary = {**outcome.summary, "history": str(out)}
    priv = summary.get("privacy") or {}
    human = "\n".join([f"case {case.name}: {summary['rounds']} rounds ({summary['stop_reason']}), "
                       f"{summary['elapsed_s']:.1f} s",
                       f"  objective           {summary['objective']:.6g}",
                       f"  consensus residual  {summary['consensus_residual']:.3e}",
                       f"  max violation       {summary['max_violation']:.3e}",
                       f"  noise magnitude     {summary['noise_magnitude']:.4g}",
                       *(f"  {k:19s} {v:.6g}" for k, v in summary.items()
                         if k in ("train_cost", "test_error") and v is not None),
                       f"  privacy (worst agent) {priv}" if priv else "  privacy: none",
                       f"  history saved to {out}"])
    _emit(summary, as_json, human)


@cli.command("central")
@click.argument("case_file")
@click.option("--objective", type=click.Choice(["cost", "balance"]), default=None,
              help="Power cases: the objective of the reference solve.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object as the last line.")
@friendly_errors
def central_cmd(case_file, objective, as_json) -> None:
    """Centralized reference solve of CASE_FILE (optimal value, solver, time)."""
    from ..central import solve_central
    from ..config import load_case
    from ..runs import build_instance

    case = load_case(case_file)
    if objective is not None and objective != case.model.get("objective"):
        case.model["objective"] = objective
        case.model.pop("penalty", None)  # the case's weight was chosen for its own objective
    instance = build_instance(case)
    if instance.central is not None:
        info = instance.central()
    else:
        ref = solve_central(instance.agents)
        info = {k: ref[k] for k in ("objective", "solver", "status", "time_s")}
    info = {"case": case.name, **info}
    human = "\n".join(f"{k:12s} {v}" for k, v in info.items() if not isinstance(v, (list, dict)))
    _emit(info, as_json, human)


@cli.command("study")
@click.argument("study_file")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Output directory (results table, ledger, figures, report). Re-running resumes.")
@click.option("--rounds", type=int, default=None, help="Override the study's rounds (e.g. a quick look).")
@click.option("--data", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Sharing studies: a local LIBSVM training file (e.g. a9a) instead of the bundled data.")
@click.option("--test-data", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Sharing studies: the matching LIBSVM test file (e.g. a9a.t).")
@click.option("--progress/--no-progress", default=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object as the last line.")
@friendly_errors
def study_cmd(study_file, out, rounds, data, test_data, progress, as_json) -> None:
    """The comparison grid of STUDY_FILE (mechanisms x eps x J x seeds) -> CSV, figures, report.

    A study with ``[study] kind = "sharing"`` runs the ADMM-sharing study instead (noise levels x seeds,
    cvxdp.study_sharing); --rounds then sets its epochs. A study with ``[study] kind = "graph"`` runs the
    decentralized-ADMM study (settings x runs, cvxdp.study_graph); --data/--test-data then give the UCI Adult
    files (adult.data / adult.test) instead of the bundled data.
    """
    from ..study import run_study
    from ..study_graph import is_graph_study, run_graph_study
    from ..study_sharing import is_sharing_study, run_sharing_study

    if is_sharing_study(study_file):
        info = run_sharing_study(study_file, out, epochs=rounds, data=data, test_data=test_data,
                                 progress=progress and sys.stderr.isatty())
    elif is_graph_study(study_file):  # [study] kind = "graph": M-ADMM/PP/DVP/R-ADMM/MR-ADMM (cvxdp.study_graph)
        info = run_graph_study(study_file, out, rounds=rounds, data=data, test_data=test_data,
                               progress=progress and sys.stderr.isatty())
    elif data is not None or test_data is not None:
        raise click.UsageError("--data/--test-data apply to sharing studies ([study] kind = \"sharing\") only.")
    else:
        info = run_study(study_file, out, rounds=rounds, progress=progress)
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


def main() -> None:
    cli()


if __name__ == "__main__":  # pragma: no cover
    main()
