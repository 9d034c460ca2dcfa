"""The ``cvxdp`` command line: cases, run, central, study, privacy (SPEC §8).

Every command takes ``--json`` and then prints exactly one JSON object as the last line of stdout.

Start-up: this module imports only click and the standard library at module level; each command imports
what it needs in its body, so ``--help``, ``--version``, ``cases`` and ``privacy`` never load the modelling
stack (cvxpy, pandas, networkx, pandapower). ``tests/test_startup.py`` checks it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..config.files import load_toml, shipped_cases_dir, shipped_networks
from ..config.schema import schema_epilog
from .audit_cmd import audit
from .common import MECH_HELP, SUPPORTED_MECHANISMS, backend_options, friendly_errors
from .privacy_cmd import privacy


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="cvxdp")
def cli() -> None:
    """cvxdp: constrained, differentially private, distributed convex optimization."""


@cli.command("cases")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@friendly_errors
def cases_cmd(as_json: bool) -> None:
    """List the shipped cases and studies, and the power networks known by name (pandapower, PGLib-OPF)."""
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
              help=f"Privacy mechanism (overrides [privacy] mechanism). Supported per algorithm: {MECH_HELP}.")
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
    from .tasks import run_task  # start-up: the modelling stack loads only when a command runs

    run_task(case_file, network, zones, objective, data, mechanism, epsilon, delta, calibration, noise_source,
             rounds, local_updates, algorithm, seed, accountant, ac_check, out, overwrite, public_dir, backend, ray_cpus,
             ray_address, progress, as_json)


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
    from .tasks import central_task  # start-up: the modelling stack loads only when a command runs

    central_task(case_file, network, zones, objective, time_limit, progress, as_json)


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
    from .tasks import study_task  # start-up: the modelling stack loads only when a command runs

    study_task(study_file, out, rounds, data, test_data, backend, ray_cpus, ray_address, progress,
               as_json)


cli.add_command(privacy)
cli.add_command(audit)


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
