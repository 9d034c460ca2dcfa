"""Issue 38's CLI answers: the --network shortcut keeps each algorithm's defaults, Ctrl-C says how to resume,
gaps only against the same objective, the consensus message of a run that met its rule, rounded text."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

import cvxdp
from cvxdp.cli.main import cli
from cvxdp.config.build import make_algorithm

CASES = Path(__file__).resolve().parents[2] / "cases"


def invoke(*args, ok=True):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    if ok:
        assert result.exit_code == 0, result.output
    return result


def last_json(result) -> dict:
    return json.loads(result.stdout.strip().splitlines()[-1])


def _shortcut(algorithm):
    from cvxdp.cli.tasks import _case

    return _case(None, "case14", 3, None, None, None, None, None, None, None, None, None, algorithm, None, None)


def test_network_shortcut_keeps_each_algorithms_own_defaults():
    # before: the shortcut fixed rho = 1.0 for every algorithm, so ADMM never got its documented rho = "auto"
    admm = make_algorithm(_shortcut("admm").algorithm)
    assert isinstance(admm, cvxdp.ADMM) and admm.rho == cvxdp.ADMM().rho == "auto"
    assert admm.rounds == 300
    ladmm = make_algorithm(_shortcut(None).algorithm)  # the shortcut's own documented LinearizedADMM set-up
    assert isinstance(ladmm, cvxdp.LinearizedADMM) and (ladmm.rho, ladmm.eta) == (1.0, 1.0)


def test_ctrl_c_says_where_the_run_stopped_and_how_to_resume(tmp_path, monkeypatch):
    import cvxdp.cli.tasks as tasks

    real = tasks.run_case

    def interrupted_at_round_7(case, **kwargs):
        def callback(t, row):
            kwargs["callback"](t, row)
            if t == 7:
                raise KeyboardInterrupt

        return real(case, **{**kwargs, "callback": callback})

    monkeypatch.setattr(tasks, "run_case", interrupted_at_round_7)
    args = ("run", CASES / "toy.toml", "--rounds", "12", "--seed", "0", "--out", tmp_path / "r", "--no-progress")
    stopped = invoke(*args, ok=False)
    assert stopped.exit_code == 130 and "Aborted" not in stopped.output
    assert ("interrupted at round 8; run the same command again to resume (from the checkpoint of round 5)."
            in stopped.output), stopped.output
    monkeypatch.setattr(tasks, "run_case", real)
    resumed = invoke(*args, "--json")
    assert last_json(resumed)["rounds"] == 12


def test_ctrl_c_in_a_study_says_its_finished_runs_are_kept(tmp_path, monkeypatch):
    from cvxdp.studies import GridStudy

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(GridStudy, "run", interrupt)
    (tmp_path / "study.toml").write_text(f'[study]\ncase = "{(CASES / "toy.toml").as_posix()}"\n'
                                         'mechanisms = ["ObjG"]\nepsilons = [1.0]\nrounds = 2\n')
    stopped = invoke("study", tmp_path / "study.toml", "--out", tmp_path / "out", "--no-progress", ok=False)
    assert stopped.exit_code == 130 and "Aborted" not in stopped.output
    assert "interrupted during the study; run the same command again to resume (its finished runs in" \
        in stopped.output


def test_ctrl_c_in_a_federation_says_how_to_resume(tmp_path, monkeypatch):
    import cvxdp.cli.tasks as tasks

    stopped_nodes = []

    class Interrupted:  # LocalFederation's face: Ctrl-C arrives while the coordinator waits for the run
        def __init__(self, *args, **kwargs):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            stopped_nodes.append(exc[0])
            return False

        def run(self, *args, **kwargs):
            raise KeyboardInterrupt

    monkeypatch.setattr(tasks, "LocalFederation", Interrupted)
    stopped = invoke("federate", CASES / "toy.toml", "--local", "--rounds", "2", "--out", tmp_path / "f", ok=False)
    assert stopped.exit_code == 130 and "Aborted" not in stopped.output
    assert stopped_nodes == [KeyboardInterrupt]  # the SuperLink and SuperNodes were stopped on the way out
    assert ("interrupted during the federation; run the same command again to resume (no round was checkpointed "
            "yet, so it starts afresh)." in stopped.output), stopped.output


def test_a_non_private_run_that_met_its_rule_is_not_called_noise_dominated(tmp_path):
    # before: "the run did not reach consensus (noise-dominated, ...)" after a non-private run that met its rule
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        payload = last_json(invoke("run", CASES / "pglib14_2areas.toml", "--out", tmp_path / "r", "--no-progress",
                                   "--json"))
    assert payload["stop_reason"] == "tolerance" and payload["mechanism"] == "none"
    (message,) = [str(w.message) for w in caught if "outside the feasible set" in str(w.message)]
    assert "noise" not in message and "did not reach consensus" not in message
    assert "the run met its stopping rule" in message


def test_gaps_only_against_an_optimum_of_the_same_objective(tmp_path):
    # before: a balance-objective run reported a generation-cost "gap" against the central *balance* optimum's
    # dispatch (-20,453 $/h on case118), a number that bounds nothing
    args = ("run", CASES / "case14_3zones.toml", "--algorithm", "admm", "--rounds", "3", "--seed", "0",
            "--no-progress")
    payload = last_json(invoke(*args, "--out", tmp_path / "r", "--json"))
    assert payload["objective_kind"] == "balance" and payload["cost"] > 0 and payload["central_cost"] > 0
    # no polished point in 3 rounds (round 1 never polishes); where one exists its cost gap is null too
    assert payload["cost_gap"] is None and payload.get("polished_cost_gap") is None
    human = invoke(*args, "--out", tmp_path / "h").output
    (line,) = [x for x in human.splitlines() if x.strip().startswith("generation cost")]
    assert "gap" not in line and "not the objective" in line
    # the cost objective: the gap is against the central optimum of the cost objective
    case = tmp_path / "cost.toml"
    case.write_text((CASES / "pglib14_2areas.toml").read_text())
    cost = last_json(invoke("run", case, "--rounds", "3", "--out", tmp_path / "c", "--no-progress", "--json"))
    assert cost["objective_kind"] == "cost" and cost["cost_gap"] == cost["cost"] - cost["central_cost"]


def _long_numbers(text: str) -> list[str]:
    """Numbers printed with more than 7 significant digits (e.g. 9.999999999999999e-05, 0.022795220326143548)."""
    import re

    found = re.findall(r"\d+\.\d+(?:e[-+]?\d+)?", text)
    return [x for x in found if len(x.split("e")[0].replace(".", "").lstrip("0")) > 7]


def test_text_rounds_numbers_and_json_keeps_full_precision(tmp_path):
    args = ("run", CASES / "toy.toml", "--mechanism", "ObjL", "--epsilon", "0.0001", "--rounds", "3", "--seed", "0",
            "--no-progress")
    human = invoke(*args, "--out", tmp_path / "h").output
    (line,) = [x for x in human.splitlines() if "privacy (worst agent" in x]
    assert "basic (0.0003, 0)" in line and not _long_numbers(line), line  # before: 0.00030000000000000003
    payload = last_json(invoke(*args, "--out", tmp_path / "j", "--json"))
    assert payload["privacy"]["basic"][0] == 3 * 0.0001  # full precision: 0.00030000000000000003
    central = invoke("central", CASES / "toy.toml", "--no-progress").output
    assert not _long_numbers(central), central  # before: objective 0.022795220326143548
    exact = last_json(invoke("central", CASES / "toy.toml", "--no-progress", "--json"))["objective"]
    assert f"objective                {exact:.6g}" in central and _long_numbers(repr(exact))


def test_ac_check_side_by_side_says_whether_relaxation_or_distribution_is_at_fault(tmp_path):
    # before: only the distributed point's verdict, so a failure of the SOC relaxation itself (case118: the central
    # optimum fails by 101 MVAr, the distributed point by 102) read as a failure of the distributed run
    from cvxdp_models.power.template import ac_diagnosis

    # case14 in 2 automatic zones, cost objective: exact ADMM has a polished dispatch by round 8
    args = ("run", "--network", "case14", "--zones", "2", "--objective", "cost", "--algorithm", "admm", "--rounds", "8",
            "--seed", "0", "--ac-check", "--no-progress")
    payload = last_json(invoke(*args, "--out", tmp_path / "j", "--json"))
    points = payload["ac_points"]
    assert list(points) == ["central SOC", "distributed", "polished"]
    assert points["distributed"]["feasible"] == payload["ac_feasible"]  # the distributed point's keys, as before
    assert (payload["ac_at_fault"], payload["ac_diagnosis"]) == tuple(ac_diagnosis(points))
    human = invoke(*args, "--out", tmp_path / "h").output
    header = next(x for x in human.splitlines() if "central SOC" in x and "distributed" in x)
    assert "polished" in header and f"verdict: {payload['ac_diagnosis']}" in human

    def point(*violations):
        return {"feasible": not violations, "violations": list(violations)}

    q, slack = "generator reactive-limit violation 5 MVAr > 1 MVAr", "slack active power mismatch 9 MW > 2 MW"
    assert ac_diagnosis({"central SOC": point(q), "distributed": point(q)})[0] == "relaxation"
    assert ac_diagnosis({"central SOC": point(), "distributed": point(q)})[0] == "distribution"
    assert ac_diagnosis({"central SOC": point(slack), "distributed": point(slack, q)})[0] == "both"
    assert ac_diagnosis({"central SOC": point(q), "distributed": point(q), "polished": point()})[0] == "none"
