"""M-ADMM, PP and DVP over a graph: convergence to the centralized ERM optimum, privacy ledger = bound (26),
seeds, budget, checkpoints, clear errors, the CLI and the study."""

from __future__ import annotations

import json
from pathlib import Path

import cvxpy as cp
import networkx as nx
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import cvxdp
from cvxdp.cli.main import cli
from cvxdp.errors import DeclarationError, InvalidParameterError
from cvxdp.families.graph.mechanism import bound_26, privacy_curve_26
from cvxdp.families.graph.topology import check_graph
from cvxdp_models.erm import make_erm

CASES = Path(__file__).resolve().parents[3] / "cases"
ETA1 = [0.55, 0.65, 0.6, 0.55, 0.6]
Q = [1.01, 1.03, 1.1, 1.2, 1.02]


def _gaps(inst, ref, result):
    opt = ref["objective"]
    f_bar = np.asarray(result.solution["f"])
    return (abs(result.history["objective"].iloc[-1] - opt) / opt,
            (sum(nd.value(f_bar) for nd in inst.nodes) - opt) / opt,
            float(np.linalg.norm(f_bar - ref["solution"])))


# --------------------------------------------------------------------------- convergence
def test_madmm_converges_on_a_random_5_node_graph(erm5):
    inst, ref = erm5
    algo = cvxdp.MADMM(graph="random", eta=ETA1, q=1.0, theta=0.5, rounds=150)
    result = cvxdp.solve(inst.agents, algorithm=algo, seed=0)
    gap_nodes, gap_mean, dist = _gaps(inst, ref, result)

    assert gap_nodes <= 1e-4 and gap_mean <= 1e-4 and dist < 1e-2
    assert result.stop_reason == "rounds" and len(result.history) == 150
    assert result.history["max_deviation"].iloc[-1] < 1e-4
    assert set(result.local) == {a.name for a in inst.agents}
    assert result.privacy["paper_bound"] is None and result.privacy["worst"]["basic"][0] == 0.0


def test_madmm_and_dvp_converge_on_a_random_20_node_graph(erm20):
    inst, ref = erm20
    for algo in (cvxdp.MADMM(graph="random", eta=0.1, theta=0.1, rounds=150),
                 cvxdp.DVP(graph="random", theta=0.1, rounds=150)):
        result = cvxdp.solve(inst.agents, algorithm=algo, seed=1)
        gap_nodes, gap_mean, _ = _gaps(inst, ref, result)
        assert gap_nodes <= 1e-4 and gap_mean <= 1e-4, algo.name


def test_growing_private_penalties_still_converge(erm5):
    inst, ref = erm5
    algo = cvxdp.MADMM(graph="random", eta=ETA1, q=[1.001, 1.002, 1.003, 1.001, 1.002], theta=0.5, rounds=200)
    gap_nodes, gap_mean, _ = _gaps(inst, ref, cvxdp.solve(inst.agents, algorithm=algo, seed=0))

    assert gap_nodes <= 1e-4 and gap_mean <= 1e-4


def test_dvp_is_madmm_with_eta_equal_theta(erm5):
    inst, _ = erm5
    pp = cvxdp.PenaltyPerturbation(alpha=5.0)
    a = cvxdp.solve(inst.agents, algorithm=cvxdp.DVP(theta=0.5, rounds=8), privacy=pp, seed=3)
    b = cvxdp.solve(inst.agents, algorithm=cvxdp.MADMM(eta=0.5, q=1.0, theta=0.5, rounds=8), privacy=pp, seed=3)

    assert np.array_equal(a.history["objective"], b.history["objective"])
    assert a.privacy["paper_bound"] == b.privacy["paper_bound"]


def test_cvxpy_local_solver_agrees_with_newton(erm5):
    inst, _ = erm5
    kw = {"graph": "ring", "eta": 0.5, "theta": 0.5, "rounds": 4}
    fast = cvxdp.solve(inst.agents, algorithm=cvxdp.MADMM(**kw), seed=0)
    slow = cvxdp.solve(inst.agents, algorithm=cvxdp.MADMM(local_solver="cvxpy", **kw), seed=0)

    assert np.allclose(fast.history["objective"], slow.history["objective"], rtol=1e-6)
    assert slow.agent_history["solver"].str.startswith("CLARABEL").all()


def test_constrained_nodes_use_the_compiled_cvxpy_update():
    rng = np.random.default_rng(0)
    agents = []
    for i in range(3):
        f = cp.Variable(2, name="f")
        target = rng.normal(size=2) * 3
        agents.append(cvxdp.Agent(f"n{i}", cp.sum_squares(f - target), [cp.abs(f) <= 1.0], shared={"f": f}))
    result = cvxdp.solve(agents, algorithm=cvxdp.MADMM(graph="complete", eta=1.0, theta=1.0, rounds=80), seed=0)
    central = cvxdp.solve_central(agents)

    assert result.history["max_violation"].max() <= 1e-6
    assert result.history["objective"].iloc[-1] == pytest.approx(central["objective"], rel=1e-4)


# --------------------------------------------------------------------------- privacy: ledger = (26)
def test_pp_ledger_is_bound_26_as_written(erm5):
    inst, _ = erm5
    names = [a.name for a in inst.agents]
    T, alpha1, growth = 12, [2.0, 3.0, 4.0, 3.0, 2.0], 1.05
    algo = cvxdp.MADMM(graph="random", graph_seed=4, eta=ETA1, q=Q, theta=0.5, rounds=T)
    result = cvxdp.solve(inst.agents, algorithm=algo, privacy=cvxdp.PenaltyPerturbation(alpha=alpha1, growth=growth),
                         seed=0)
    topo = check_graph(algo.build_graph(names), names)
    t = np.arange(1, T + 1)
    eta = np.array(ETA1)[:, None] * np.array(Q)[:, None] ** (t - 1)
    alpha = np.array(alpha1)[:, None] * growth ** (t - 1)
    B = [nd.B for nd in inst.nodes]

    assert result.privacy["paper_bound"] == pytest.approx(bound_26(10.0, 0.25, alpha, eta, topo.degrees, B),
                                                          rel=1e-12)
    assert result.history["bound_P"].to_numpy() == pytest.approx(
        privacy_curve_26(10.0, 0.25, alpha, eta, topo.degrees, B), rel=1e-12)
    assert result.privacy["bound"] == "(26)" and result.privacy["worst"]["steps"] == T
    assert result.history["noise_magnitude"].gt(0).all()
    assert result.privacy["worst"]["pld"] <= result.privacy["worst"]["basic"][0] + 1e-9


def test_same_seed_same_numbers_and_seeds_matter(erm5):
    inst, _ = erm5
    run = lambda s: cvxdp.solve(inst.agents, algorithm=cvxdp.MADMM(rounds=6),  # noqa: E731
                                privacy=cvxdp.PenaltyPerturbation(alpha=3.0), seed=s)
    a, b, c = run(5), run(5), run(6)

    assert np.array_equal(a.history["objective"], b.history["objective"])
    assert all(np.array_equal(a.local[n], b.local[n]) for n in a.local)
    assert not np.array_equal(a.history["objective"], c.history["objective"])


def test_budget_stops_before_the_iteration_that_would_exceed_it(erm5):
    inst, _ = erm5
    free = cvxdp.solve(inst.agents, algorithm=cvxdp.DVP(rounds=20), privacy=cvxdp.PenaltyPerturbation(alpha=3.0))
    per_iteration = free.privacy["paper_bound"] / 20
    capped = cvxdp.solve(inst.agents, algorithm=cvxdp.DVP(rounds=20), privacy=cvxdp.PenaltyPerturbation(alpha=3.0),
                         budget=(7.5 * per_iteration, 0.0))

    assert capped.stop_reason == "budget" and len(capped.history) == 7
    assert capped.privacy["paper_bound"] <= 7.5 * per_iteration


def test_checkpoint_resume_gives_the_uninterrupted_run(erm5, tmp_path):
    inst, _ = erm5
    algo = cvxdp.MADMM(eta=0.5, q=1.02, theta=0.5, rounds=10)
    pp = cvxdp.PenaltyPerturbation(alpha=3.0)
    full = cvxdp.solve(inst.agents, algorithm=algo, privacy=pp, seed=2)

    class Stop(Exception):
        pass

    def interrupt(t, row):
        if t == 6:
            raise Stop

    with pytest.raises(Stop):
        cvxdp.solve(inst.agents, algorithm=algo, privacy=pp, seed=2, checkpoint=tmp_path, callback=interrupt)
    resumed = cvxdp.solve(inst.agents, algorithm=algo, privacy=pp, seed=2, checkpoint=tmp_path)

    assert np.array_equal(resumed.history["objective"], full.history["objective"])
    assert all(np.array_equal(resumed.local[n], full.local[n]) for n in full.local)
    assert resumed.ledger == full.ledger
    with pytest.raises(cvxdp.errors.CvxdpError, match="another configuration"):
        cvxdp.solve(inst.agents, algorithm=algo, privacy=pp, seed=3, checkpoint=tmp_path)


def test_result_saves_and_loads(erm5, tmp_path):
    inst, _ = erm5
    result = cvxdp.solve(inst.agents, algorithm=cvxdp.MADMM(rounds=3), privacy=cvxdp.PenaltyPerturbation(alpha=3.0))
    loaded = cvxdp.load_result(result.save(tmp_path / "r"))

    assert loaded.privacy["paper_bound"] == pytest.approx(result.privacy["paper_bound"])
    assert np.allclose(loaded.solution["f"], result.solution["f"])
    assert list(loaded.history["round"]) == [1, 2, 3]


# --------------------------------------------------------------------------- errors
def test_parameters_are_validated_with_uniform_messages(erm5):
    inst, _ = erm5
    with pytest.raises(InvalidParameterError,
                       match=r"The 'theta' parameter of MADMM must be a float in \(0, inf\), a list of them \(one per node\) or a "
                             r"\{node: value\} mapping. Got -1 instead."):
        cvxdp.solve(inst.agents, algorithm=cvxdp.MADMM(theta=-1))
    with pytest.raises(InvalidParameterError, match=r"The 'q' parameter of MADMM must be a float in \[1, inf\)"):
        cvxdp.solve(inst.agents, algorithm=cvxdp.MADMM(q=[1.0, 0.9, 1.0, 1.0, 1.0]))
    with pytest.raises(InvalidParameterError, match="'eta' parameter of MADMM must be a float or a list of 5"):
        cvxdp.solve(inst.agents, algorithm=cvxdp.MADMM(eta=[0.5, 0.5]))
    with pytest.raises(InvalidParameterError, match="'graph' parameter of DVP"):
        cvxdp.solve(inst.agents, algorithm=cvxdp.DVP(graph="star"))
    with pytest.raises(InvalidParameterError, match="None or a cvxdp.PenaltyPerturbation"):
        cvxdp.solve(inst.agents, algorithm=cvxdp.MADMM(),
                    privacy=cvxdp.ObjectivePerturbation("laplace", epsilon=1.0))


def test_graph_errors_name_the_problem(erm5):
    inst, _ = erm5
    names = [a.name for a in inst.agents]
    split = nx.Graph([(names[0], names[1]), (names[2], names[3]), (names[3], names[4])])
    with pytest.raises(DeclarationError, match="disconnected"):
        cvxdp.solve(inst.agents, algorithm=cvxdp.MADMM(graph=split))
    with pytest.raises(DeclarationError, match="have no agent"):
        cvxdp.solve(inst.agents[:4], algorithm=cvxdp.MADMM(graph=nx.path_graph(names)))
    with pytest.raises(DeclarationError, match="have no node"):
        cvxdp.solve(inst.agents, algorithm=cvxdp.MADMM(graph=nx.path_graph(names[:4])))


def test_private_runs_check_the_parameter_condition_and_the_erm_constants(erm5):
    inst, _ = erm5
    big_c = make_erm({"nodes": 5, "C": 500.0, "rho": 0.01, "max_samples": 300})
    with pytest.raises(InvalidParameterError, match="parameter condition 2 c1 < B_i/C"):
        cvxdp.solve(big_c.agents, algorithm=cvxdp.DVP(theta=0.01), privacy=cvxdp.PenaltyPerturbation(alpha=1.0))
    cvxdp.solve(big_c.agents, algorithm=cvxdp.DVP(theta=0.01, rounds=1))  # non-private: no condition
    f = cp.Variable(2, name="f")
    plain = [cvxdp.Agent(f"p{i}", cp.sum_squares(f - i), [], shared={"f": f}) for i in range(2)]
    with pytest.raises(DeclarationError, match="ERM constants"):
        cvxdp.solve(plain, algorithm=cvxdp.MADMM(graph="complete"), privacy=cvxdp.PenaltyPerturbation())


def test_local_only_variables_are_refused():
    f, s = cp.Variable(2, name="f"), cp.Variable(1, name="s")
    agents = [cvxdp.Agent(f"p{i}", cp.sum_squares(f) + cp.sum_squares(s), [], shared={"f": f}) for i in range(2)]
    with pytest.raises(DeclarationError, match="every variable shared"):
        cvxdp.solve(agents, algorithm=cvxdp.MADMM(graph="complete"))


# --------------------------------------------------------------------------- CLI and study
@pytest.mark.parametrize("algorithm", ["madmm", "dvp", "radmm", "mradmm"])
def test_cli_run_accepts_the_graph_algorithms(algorithm, tmp_path):
    out = CliRunner().invoke(cli, ["run", str(CASES / "erm_madmm.toml"), "--algorithm", algorithm, "--rounds", "6",
                                   "--out", str(tmp_path / "r"), "--json"])
    assert out.exit_code == 0, out.output
    payload = json.loads(out.output.strip().splitlines()[-1])

    assert payload["rounds"] == 6 and payload["mechanism"] == "gamma"
    assert payload["privacy"]["basic"][0] > 0 and 0 <= payload["test_error"] <= 1
    assert len(pd.read_csv(tmp_path / "r" / "history.csv")) == 6


def test_cli_study_runs_a_graph_study_and_resumes(tmp_path):
    study = tmp_path / "s.toml"
    study.write_text(f"""[study]
kind = "graph"
name = "mini"
case = "{(CASES / 'erm_madmm.toml').as_posix()}"
runs = 2
rounds = 6
[[setting]]
label = "DVP"
panel = "p"
algorithm = {{ name = "dvp", theta = 0.5 }}
privacy = {{ mechanism = "gamma", alpha = 3.0 }}
[[setting]]
label = "PP"
panel = "p"
algorithm = {{ name = "madmm", eta = 0.5, q = 1.03, theta = 0.5 }}
privacy = {{ mechanism = "gamma", alpha = 3.0, growth = 1.03 }}
[[setting]]
label = "DVP matched"
panel = "p"
algorithm = {{ name = "dvp", theta = 0.5 }}
privacy = {{ mechanism = "gamma" }}
match_bound = "PP"
[[comparison]]
better = "PP"
than = "DVP matched"
""")
    args = ["study", str(study), "--out", str(tmp_path / "o"), "--json", "--no-progress"]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.output
    second = json.loads(CliRunner().invoke(cli, args).output.strip().splitlines()[-1])
    runs = pd.read_csv(tmp_path / "o" / "runs.csv")

    assert second["computed"] == 0 and second["reused"] == 6
    matched = runs[runs["setting"] == "DVP matched"]["bound"].iloc[0]
    assert matched == pytest.approx(runs[runs["setting"] == "PP"]["bound"].iloc[0], rel=1e-9)
    for name in ("average_loss_p.png", "privacy_p.png", "test_error.png", "report.md", "curves.csv"):
        assert (tmp_path / "o" / name).exists(), name
    assert "The papers' claims, checked" in (tmp_path / "o" / "report.md").read_text()


def test_shipped_graph_studies_load():
    from cvxdp.studies.graph import load_graph_study

    for name in ("study_madmm", "study_radmm"):
        study = load_graph_study(CASES / f"{name}.toml")
        assert study.runs == 10 and study.comparisons
    madmm = load_graph_study(CASES / "study_madmm.toml")
    fig1 = madmm.setting("M-ADMM, theta = 0.5 fixed").algorithm
    assert fig1["eta"] == ETA1 and fig1["q"] == Q and fig1["theta"] == 0.5


ADULT_ROWS = """\
39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, Male, 2174, 0, 40, United-States, <=50K
50, Self-emp-not-inc, 83311, Bachelors, 13, Married-civ-spouse, Exec-managerial, Husband, White, Male, 0, 0, 13, United-States, <=50K
54, ?, 180211, Some-college, 10, Married-civ-spouse, ?, Husband, Asian-Pac-Islander, Male, 0, 0, 60, South, >50K
52, Self-emp-inc, 287927, HS-grad, 9, Married-civ-spouse, Exec-managerial, Wife, White, Female, 15024, 0, 40, Cuba, >50K
31, Private, 45781, Masters, 14, Never-married, Prof-specialty, Not-in-family, White, Female, 14084, 0, 50, United-States, >50K
"""


def test_erm_template_reads_adult_and_studies_take_it(tmp_path):
    from cvxdp.errors import ConfigError
    from cvxdp.studies.graph import run_graph_study

    adult = tmp_path / "adult.data"
    adult.write_text(ADULT_ROWS * 150)  # 600 complete rows (the '?' row is dropped)
    inst = make_erm({"dataset": "adult", "path": str(adult), "nodes": 4, "C": 5.0})
    assert inst.info["features"] == 105 and inst.info["train_samples"] + inst.info["test_samples"] == 600
    result = cvxdp.solve(inst.agents, algorithm=cvxdp.MADMM(graph="ring", rounds=3),
                         privacy=cvxdp.PenaltyPerturbation(alpha=5.0))
    assert np.isfinite(result.history["average_loss"]).all()
    with pytest.raises(ConfigError, match="'adult' data set needs a 'path'"):
        make_erm({"dataset": "adult"})

    study = tmp_path / "s.toml"
    study.write_text(f"""[study]
kind = "graph"
case = "{(CASES / 'erm_madmm.toml').as_posix()}"
runs = 1
rounds = 3
[[setting]]
label = "PP"
algorithm = {{ name = "madmm", eta = 0.5, theta = 0.5 }}
privacy = {{ mechanism = "gamma", alpha = 3.0 }}
""")
    info = run_graph_study(study, tmp_path / "o", data=adult, progress=False)
    assert info["computed"] == 1
    assert json.loads((tmp_path / "o" / "study.json").read_text())["case"]["model"]["dataset"] == "adult"


def test_lbfgs_path_for_agents_with_a_plain_gradient(erm5):
    inst, _ = erm5
    plain = [cvxdp.Agent(nd.name, nd.objective, [], shared={"f": nd.f}, gradient=nd.gradient) for nd in inst.nodes]
    kw = {"graph": "ring", "eta": 0.5, "theta": 0.5, "rounds": 4}
    newton = cvxdp.solve(inst.agents, algorithm=cvxdp.MADMM(**kw), seed=0)
    lbfgs = cvxdp.solve(plain, algorithm=cvxdp.MADMM(**kw), seed=0)

    assert lbfgs.agent_history["solver"].str.startswith("lbfgs").all()
    assert np.allclose(newton.history["objective"], lbfgs.history["objective"], rtol=1e-7)


def test_several_shared_keys_in_any_variable_order():
    rng = np.random.default_rng(1)
    agents, targets = [], []
    for i in range(3):
        if i % 2:  # create y before x: the flat layout u differs between nodes
            y, x = cp.Variable(1, name="y"), cp.Variable(2, name="x")
        else:
            x, y = cp.Variable(2, name="x"), cp.Variable(1, name="y")
        tx, ty = rng.normal(size=2), rng.normal(size=1)
        targets.append((tx, ty))
        agents.append(cvxdp.Agent(f"n{i}", cp.sum_squares(x - tx) + 2 * cp.sum_squares(y - ty), [],
                                  shared={"x": x, "y": y}))
    result = cvxdp.solve(agents, algorithm=cvxdp.MADMM(graph="complete", eta=1.0, theta=1.0, rounds=60,
                                                       local_solver="cvxpy"))

    assert result.solution["x"] == pytest.approx(np.mean([t[0] for t in targets], axis=0), abs=1e-6)
    assert result.solution["y"] == pytest.approx(np.mean([t[1] for t in targets], axis=0), abs=1e-6)
    values = result.values("n1")
    assert values[agents[1].layout.variables[0]].shape == (1,)  # result.local is in each agent's own layout


def test_case_tables_build_the_graph_algorithms(erm5):
    from cvxdp.config.build import make_algorithm, make_privacy
    from cvxdp.errors import ConfigError

    inst, _ = erm5
    names = [a.name for a in inst.agents]
    table = {"name": "madmm", "edges": [[a, b] for a, b in zip(names, names[1:])], "eta": dict.fromkeys(names, 0.5),
             "q": 1.0, "theta": 0.5, "gamma": 0.3, "rho": 1.0, "local_updates": 1, "rounds": 3}
    algo = make_algorithm(table)
    result = cvxdp.solve(inst.agents, algorithm=algo, privacy=make_privacy({"mechanism": "gamma", "alpha": 4.0}))

    assert isinstance(algo, cvxdp.MADMM) and result.config["graph"]["topology"] == "given"
    assert len(result.config["graph"]["edges"]) == 4
    assert isinstance(make_algorithm({**table, "name": "mradmm"}), cvxdp.MRADMM)
    assert make_algorithm({"name": "radmm", "eta": 0.5, "q": 1.5, "theta": 2.0}).gamma == 0.5
    with pytest.raises(ConfigError, match="'madmm', 'dvp', 'radmm', 'mradmm'"):
        make_algorithm({"name": "nope"})
    with pytest.raises(ConfigError, match=r"unknown key\(s\) 'epsilon' for PenaltyPerturbation. Allowed: alpha, growth"):
        make_privacy({"mechanism": "gamma", "epsilon": 1.0})
