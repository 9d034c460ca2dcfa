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
from ..config.schema import schema_epilog, study_epilog
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


class SchemaHelpCommand(click.Command):
    """A command whose ``--help`` ends with the case-file keys (:func:`cvxdp.config.schema.schema_epilog`), built
    when the help is shown: the installed templates' declarations are imported then, not by every command."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self.epilog = schema_epilog()
        super().format_epilog(ctx, formatter)


def case_options(func):
    """The options of a case run, shared by ``run`` and ``federate`` (the case, its data, algorithm, privacy, seed)."""
    for option in reversed(_CASE_OPTIONS):
        func = option(func)
    return func


_CASE_OPTIONS = (
    click.argument("case_file", required=False),
    click.option("--network", default=None, help="Power shortcut without a case file: a pandapower case "
                 "(case14, case118, case300, case1354pegase, ...), a bundled PGLib-OPF case (pglib_opf_case14_ieee, "
                 "...; see `cvxdp cases`) or a MATPOWER file (*.m, relative to the current directory); needs "
                 "--zones. Runs 300 rounds of LinearizedADMM with rho = eta = 1, or of --algorithm with that "
                 "algorithm's own defaults (admm: rho = auto)."),
    click.option("--zones", type=click.IntRange(min=2), default=None,
                 help="With --network: number of automatic zones."),
    click.option("--objective", type=click.Choice(["cost", "balance"]), default=None,
                 help="With --network: the power objective (default balance, the private-data objective)."),
    click.option("--data", type=click.Path(exists=True, path_type=Path), default=None,
                 help="Local data file or directory for the case's [model] path (e.g. a LEAF FEMNIST directory)."),
    click.option("--mechanism", type=click.Choice(["none", "ObjL", "ObjG", "OutL", "OutG", "gamma"]), default=None,
                 help=f"Privacy mechanism (overrides [privacy] mechanism). Supported per algorithm: {MECH_HELP}."),
    click.option("--epsilon", type=float, default=None,
                 help="Per-step epsilon (or each agent's total with [privacy] calibrate = 'total')."),
    click.option("--delta", type=float, default=None, help="Per-step delta for Gaussian noise."),
    click.option("--calibration", type=click.Choice(["analytic", "classic"]), default=None,
                 help="Gaussian calibration: analytic (any epsilon) or classic (epsilon < 1); overrides [privacy]."),
    click.option("--noise-source", type=click.Choice(["numpy", "opendp"]), default=None,
                 help="numpy (default, reproducible, research-grade) or opendp (hardened samplers, not seedable)."),
    click.option("--rounds", type=int, default=None, help="Number of rounds T."),
    click.option("--local-updates", type=int, default=None, help="Local updates J per round."),
    click.option("--algorithm", type=click.Choice(list(SUPPORTED_MECHANISMS)), default=None),
    click.option("--seed", type=int, default=None,
                 help="Reproducible (research) noise; default: fresh secret OS entropy per run."),
    click.option("--accountant", type=click.Choice(["basic", "rdp", "pld"]), default=None),
)


@cli.command("run", cls=SchemaHelpCommand)
@case_options
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
@click.option("--data", type=click.Path(exists=True, path_type=Path), default=None,
              help="Local data file or directory for the case's [model] path (as for `cvxdp run`, e.g. a LEAF "
                   "FEMNIST directory).")
@click.option("--time-limit", type=click.FloatRange(min=0, min_open=True), default=300.0, show_default=True,
              help="Seconds each solver of the fallback chain (Clarabel, ECOS, SCS) may run.")
@click.option("--progress/--no-progress", default=True, help="Report each step on stderr.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object as the last line.")
@friendly_errors
def central_cmd(case_file, network, zones, objective, data, time_limit, progress, as_json) -> None:
    """Centralized reference solve of CASE_FILE (optimal value, solver, time); power cases add an AC check.

    "cost" is the generation cost in $/h; "objective" is in the model's units (cost objective: k$/h).
    A solver that fails is followed by the next one (Clarabel, ECOS, SCS), each capped by --time-limit and
    announced on stderr.
    """
    from .tasks import central_task  # start-up: the modelling stack loads only when a command runs

    central_task(case_file, network, zones, objective, data, time_limit, progress, as_json)


@cli.command("study", epilog=study_epilog())
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
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Grid and equal-total studies: processes running cells at once (default: every core; 1 runs "
                   "them one after another; on Ray, one after another).")
@click.option("--progress/--no-progress", default=True, help="A progress bar with the time left, on stderr.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object as the last line.")
@friendly_errors
def study_cmd(study_file, out, rounds, data, test_data, backend, ray_cpus, ray_address, workers, progress,
              as_json) -> None:
    """The study of STUDY_FILE (by its ``[study] kind``) -> CSV, figures, report.

    Without a kind: the comparison grid (mechanisms x eps x J x seeds, cvxdp.studies.grid). ``kind = "total"``
    compares methods at equal whole-run epsilon per agent, with one-shot anchors (cvxdp.studies.total);
    ``kind = "sharing"`` runs the ADMM-sharing study (noise levels x seeds; --rounds sets its epochs);
    ``kind = "graph"`` the decentralized-ADMM study (settings x runs; --data/--test-data give the UCI Adult files).
    Each kind's keys are listed below.
    """
    from .tasks import study_task  # start-up: the modelling stack loads only when a command runs

    study_task(study_file, out, rounds, data, test_data, backend, ray_cpus, ray_address, workers, progress,
               as_json)


@cli.command("parties")
@case_options
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="One folder per party: DIR/<agent>/party.toml and agents.pkl (readable by its owner only).")
@click.option("--budget-epsilon", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Each party's lifetime budget on its data set (its own ledger refuses past it).")
@click.option("--budget-delta", type=click.FloatRange(min=0, max=1, max_open=True), default=0.0, show_default=True)
@click.option("--report-feasibility", is_flag=True,
              help="Let each party release, at the end, whether the public solution lies in its feasible set.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object as the last line.")
@friendly_errors
def parties_cmd(case_file, network, zones, objective, data, mechanism, epsilon, delta, calibration, noise_source,
                rounds, local_updates, algorithm, seed, accountant, out, budget_epsilon, budget_delta,
                report_feasibility, as_json) -> None:
    """One party folder per agent of CASE_FILE, each with that party's agent only and its own policy: the case's
    [privacy] table and accountant with the same options as `cvxdp federate` (--seed: each party's research seed;
    docs/federation.md)."""
    from .tasks import parties_task  # start-up: the modelling stack loads only when a command runs

    parties_task(case_file, network, zones, objective, data, mechanism, epsilon, delta, calibration, noise_source,
                 rounds, local_updates, algorithm, seed, accountant, out, budget_epsilon, budget_delta,
                 report_feasibility, as_json)


@cli.command("party")
@click.argument("party_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--superlink", default=None, help="The coordinator's SuperLink, HOST:PORT.")
@click.option("--root-certificates", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="The CA certificate the SuperLink's TLS certificate is checked against.")
@click.option("--auth-key", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="This party's SuperNode key (registered at the SuperLink under the party's name).")
@click.option("--insecure", is_flag=True, help="Plain HTTP, no TLS: only for a test on one machine.")
@click.option("--port", type=click.IntRange(1, 65535), default=None,
              help="The SuperNode's own local port on 127.0.0.1 (default: a free one, printed at start).")
@click.option("--ledger", is_flag=True, help="Print the party's lifetime ledger (what it has released and spent on "
              "its data set, its budget and its history) and exit.")
@click.option("--json", "as_json", is_flag=True, help="With --ledger: print one JSON object as the last line.")
@friendly_errors
def party_cmd(party_file, superlink, root_certificates, auth_key, insecure, port, ledger, as_json) -> None:
    """Run PARTY_FILE's party: its SuperNode and its own executor, which answers with cvxdp's app only and keeps
    the party's own policy, lifetime ledger and state (docs/federation.md)."""
    from .tasks import party_task  # start-up: Flower loads only when a party runs

    party_task(party_file, superlink, root_certificates, auth_key, insecure, port, ledger, as_json)


@cli.command("federate", cls=SchemaHelpCommand)
@case_options
@click.option("--local", is_flag=True, help="Try it on this machine: write one party folder per agent under --out, "
              "start a real SuperLink and one real SuperNode per party on 127.0.0.1, run, and stop them all.")
@click.option("--superlink", default=None, help="The coordinator's running SuperLink, HOST:PORT (parties join it "
              "with `cvxdp party`).")
@click.option("--parties", default=None, help="With --superlink: the parties' agent names in the run's order, "
              "comma-separated.")
@click.option("--root-certificates", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="With --superlink: the CA certificate of the SuperLink's TLS certificate.")
@click.option("--tls", is_flag=True, help="With --local: TLS on every connection (a throw-away CA).")
@click.option("--auth", is_flag=True, help="With --local: SuperNode authentication (implies --tls).")
@click.option("--insecure", is_flag=True, help="With --superlink: plain HTTP (no TLS); never for a real deployment.")
@click.option("--party-budget-epsilon", type=click.FloatRange(min=0, min_open=True), default=None,
              help="With --local: each party's own privacy budget.")
@click.option("--party-budget-delta", type=click.FloatRange(min=0, max=1, max_open=True), default=0.0)
@click.option("--timeout", type=click.FloatRange(min=1), default=600.0, show_default=True,
              help="Seconds a party may take to answer a round.")
@click.option("--wait", type=click.FloatRange(min=1), default=120.0, show_default=True,
              help="Seconds to wait for every party to connect before the run starts.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The coordinator's folder: plan, checkpoint, public result (default runs/<case>-...-federated).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object as the last line.")
@friendly_errors
def federate_cmd(case_file, network, zones, objective, data, mechanism, epsilon, delta, calibration, noise_source,
                 rounds, local_updates, algorithm, seed, accountant, local, superlink, parties, root_certificates, tls,
                 auth, insecure, party_budget_epsilon, party_budget_delta, timeout, wait, out, as_json) -> None:
    """Run CASE_FILE as a federation: each party runs its own node (Flower), the coordinator holds releases only.

    Rerunning the same command resumes from the last round the coordinator and the parties checkpointed.
    """
    from .tasks import federate_task  # start-up: the modelling stack loads only when a command runs

    federate_task(case_file, network, zones, objective, data, mechanism, epsilon, delta, calibration, noise_source,
                  rounds, local_updates, algorithm, seed, accountant, local, superlink, parties, root_certificates,
                  tls, auth, insecure, party_budget_epsilon, party_budget_delta, timeout, wait, out, as_json)


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
