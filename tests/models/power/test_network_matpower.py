"""MATPOWER case files and the bundled PGLib-OPF cases as ``[model] network`` (models/power/network.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pandapower", reason="pandapower is not installed: pip install -e '.[power]'")
pytest.importorskip("matpowercaseframes", reason="not installed: pip install -e '.[power]'")

from cvxdp.errors import ConfigError, CvxdpError  # noqa: E402
from cvxdp_models.power.network import (  # noqa: E402
    BUNDLED_CASES,
    PGLIB_DIR,
    ac_network,
    load_matpower,
    load_network,
    make_ybus,
    run_ac_power_flow,
)
from cvxdp_models.power.soc import solve_central  # noqa: E402
from cvxdp_models.power.template import build  # noqa: E402

PGLIB14 = PGLIB_DIR / "pglib_opf_case14_ieee.m"


def published_soc_band(ac: float, ac_digits: int, gap_pct: float) -> tuple[float, float]:
    """The SOC costs consistent with PGLib's BASELINE.md figures: the AC cost rounded to ``ac_digits`` significant
    digits and the SOC gap ``(AC - SOC) / AC`` rounded to 0.01 %."""
    half_ac = 0.5 * 10 ** (np.floor(np.log10(ac)) - ac_digits + 1)
    lo_gap, hi_gap = (gap_pct - 0.005) / 100, (gap_pct + 0.005) / 100
    return (ac - half_ac) * (1 - hi_gap), (ac + half_ac) * (1 - lo_gap)


def test_bundled_cases_ship_unchanged_with_their_licence_note():
    assert set(BUNDLED_CASES) == {p.stem for p in PGLIB_DIR.glob("*.m")}
    readme = (PGLIB_DIR / "README.md").read_text()
    assert "v23.07" in readme and "CC BY 4.0" in readme and "github.com/power-grid-lib/pglib-opf" in readme
    for name in BUNDLED_CASES:
        assert "IEEE PES Power Grid Library - Optimal Power Flow - v23.07" in (PGLIB_DIR / f"{name}.m").read_text()


def test_pglib_case14_loads_with_matpower_numbers_and_order():
    case = load_network("pglib_opf_case14_ieee")
    assert (case.n_bus, case.n_gen, case.n_branch, case.base_mva) == (14, 5, 20, 100.0)
    assert case.bus_number.tolist() == list(range(1, 15))
    assert case.pd.sum() * case.base_mva == pytest.approx(259.0)
    # the file's first branch 1-2 (r 0.01938, x 0.05917, b 0.0528, rateA 472 MVA, angle limits +-30 degrees)
    assert (case.bus_number[case.f_bus[0]], case.bus_number[case.t_bus[0]]) == (1, 2)
    assert (case.r[0], case.x[0], case.b[0]) == pytest.approx((0.01938, 0.05917, 0.0528))
    assert case.rate_a[0] == pytest.approx(4.72)
    assert np.rad2deg(case.angmax[0]) == pytest.approx(30.0)
    assert load_network("pglib_opf_case14_ieee") is case  # cached by content


def test_pglib_case14_central_soc_cost_matches_pglib_baseline():
    # PGLib-OPF v23.07 BASELINE.md, pglib_opf_case14_ieee: AC 2.1781e+03 $/h, SOC gap 0.11 %
    lo, hi = published_soc_band(2.1781e3, 5, 0.11)
    res = solve_central(load_network("pglib_opf_case14_ieee"), "cost", penalty=None, cost_scale=1000.0)
    assert res["status"] == "optimal"
    assert lo <= res["cost"] <= hi, (lo, res["cost"], hi)
    assert res["objective"] == pytest.approx(res["cost"] / 1000.0)


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="measured 550393.8 $/h, 6 $/h (0.001 %) above the band PGLib's rounded "
                   "figures allow ([550321.6, 550387.8]); cause not determined (a small difference between PowerModels' "
                   "SOC-WR model and ours, or the accuracy of PGLib's own interior-point solve: 1.1e-5 relative)")
def test_pglib_case300_central_soc_cost_against_pglib_baseline():
    # PGLib-OPF v23.07 BASELINE.md, pglib_opf_case300_ieee: AC 5.6522e+05 $/h, SOC gap 2.63 %
    lo, hi = published_soc_band(5.6522e5, 5, 2.63)
    case = load_network("pglib_opf_case300_ieee")
    assert 9533 in case.bus_number  # non-contiguous MATPOWER bus numbers are kept
    res = solve_central(case, "cost", penalty=None, cost_scale=1000.0)
    assert lo <= res["cost"] <= hi, (lo, res["cost"], hi)


@pytest.mark.parametrize("name", BUNDLED_CASES)
def test_ac_net_of_a_file_case_has_matpowers_admittances(name):
    import pandapower
    from pandapower.auxiliary import LoadflowNotConverged

    case = load_network(name)
    ac = ac_network(case)
    try:  # builds pandapower's internal admittance matrix; the file's own set-points need not converge (case300)
        pandapower.runpp(ac.net, trafo_model="pi", calculate_voltage_angles=True, numba=False, max_iteration=1)
    except LoadflowNotConverged:
        pass
    ybus = ac.net._ppc["internal"]["Ybus"].toarray()
    pos = ac.net._pd2ppc_lookups["bus"][ac.bus]
    expected = make_ybus(case).toarray()
    assert np.abs(ybus[np.ix_(pos, pos)] - expected).max() <= 1e-9 * np.abs(expected).max()


def test_ac_check_on_pglib_case14_converges_and_is_feasible():
    case = load_network("pglib_opf_case14_ieee")
    zm = build({"network": "pglib_opf_case14_ieee", "zones": [[1, 2, 3, 4, 5], list(range(6, 15))],
                "objective": "cost"}, base_dir=Path("."))
    out = zm.central(ac_check=True)
    assert out["ac_converged"] is True and out["ac_reason"] == ""
    assert out["ac_feasible"], out["ac_violations"]
    # the AC flow loses a little more than the relaxation: the slack picks up a small positive mismatch
    assert 0.0 < out["ac_slack_p_mw"] < 0.01 * case.pd.sum() * case.base_mva


def _edit(text: str, table: str, row: int, col: int, value: str) -> str:
    """``text`` with column ``col`` of data row ``row`` of ``mpc.<table>`` replaced by ``value``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"mpc.{table} = ["))
    fields = lines[start + 1 + row].split()
    fields[col] = value
    lines[start + 1 + row] = "\t" + "\t".join(fields)
    return "\n".join(lines) + "\n"


def test_file_with_outages_unlimited_lines_shared_buses_and_linear_costs(tmp_path):
    text = PGLIB14.read_text()
    text = _edit(text, "gen", 4, 7, "0")        # generator 5 (a synchronous condenser at bus 8) out of service
    text = _edit(text, "gen", 1, 0, "1")        # generator 2 moved to bus 1 (two generators at bus 1)
    text = _edit(text, "branch", 5, 10, "0")    # branch 6 out of service
    text = _edit(text, "branch", 0, 5, "0")     # branch 1 without thermal limit
    lines = text.splitlines()  # generator 1's cost: linear (NCOST = 2: c1 c0, the row padded with a zero)
    start = next(i for i, line in enumerate(lines) if line.startswith("mpc.gencost = ["))
    lines[start + 1] = "\t2\t 0.0\t 0.0\t 2\t 7.5\t 0.0\t 0.0;"
    path = tmp_path / "edited.m"
    path.write_text("\n".join(lines) + "\n")

    case = load_matpower(path)
    assert case.name == "edited"
    assert case.gen_status.tolist() == [True, True, True, True, False]
    assert case.bus_number[case.gen_bus].tolist() == [1, 1, 3, 6, 8]
    assert not case.branch_status[5] and case.rate_a[0] == 0.0
    assert case.gencost[0].tolist() == pytest.approx([0.0, 750.0, 0.0])  # per unit: 7.5 $/MWh * 100 MVA
    res = solve_central(case, "cost", penalty=None, cost_scale=1000.0)
    assert res["status"] == "optimal"
    # the cheaper generator 1 runs at or below its 340 MW limit; the outage and the edits change the optimum
    assert res["pg"][0] * case.base_mva <= 340.0 + 1e-4 and res["cost"] != pytest.approx(2175.70, abs=1.0)
    flow = run_ac_power_flow(case, res["pg"], res["vm"])
    assert flow.converged, flow.message
    # two generators at bus 1 (the second is pandapower's static generator): they share the bus's reactive
    # output at the same fraction of their reactive ranges (MATPOWER's rule)
    frac = (flow.qg[:2] - case.qmin[:2]) / (case.qmax[:2] - case.qmin[:2])
    assert np.isfinite(flow.qg).all() and frac[0] == pytest.approx(frac[1])


# ----------------------------------------------------------------------------------------- [model] network
def _zones14():
    return [[1, 2, 3, 4, 5], list(range(6, 15))]


def test_relative_path_resolves_against_base_dir(tmp_path):
    (tmp_path / "grids").mkdir()
    shutil.copy(PGLIB14, tmp_path / "grids" / "mine.m")
    inst = build({"network": "grids/mine.m", "zones": _zones14()}, base_dir=tmp_path)
    assert inst.info["case"] == "mine" and inst.info["buses"] == 14
    assert inst.settings["network"] == "grids/mine.m"
    with pytest.raises(ConfigError, match=r"'network' entry of \[model\].*'grids/mine.m'.*does not exist"):
        build({"network": "grids/mine.m", "zones": _zones14()}, base_dir=tmp_path / "grids")


def test_pmada_two_area_partition_works_on_pglib_case14():
    inst = build({"network": "pglib_opf_case14_ieee", "zones": _zones14(), "objective": "cost"}, base_dir=Path("."))
    assert [a.name for a in inst.agents] == ["zone1", "zone2"]
    assert inst.info["zones"] == _zones14()
    assert inst.info["cut_lines"]  # buses 1-5 and 6-14 are joined by lines 4-7, 4-9, 5-6


def test_auto_zones_on_pglib_case300():
    inst = build({"network": "pglib_opf_case300_ieee", "auto_zones": 4, "objective": "cost"}, base_dir=Path("."))
    zones = inst.info["zones"]
    assert len(zones) == 4 and sorted(b for z in zones for b in z) == sorted(load_network(
        "pglib_opf_case300_ieee").bus_number.tolist())


@pytest.mark.parametrize("network, match", [
    ("missing.m", r"The 'network' entry of \[model\] must name an existing MATPOWER case file.*'missing.m'"),
    ("grids/", r"The 'network' entry of \[model\] must name a MATPOWER case file.*'grids/'.*directory"),
    ("junk.m", r"The 'network' entry of \[model\] must name a MATPOWER version-2 case file.*junk.m"),
    ("pwl.m", r"The 'network' entry of \[model\] \(.*pwl.m'\): pwl: generator 0 has a piecewise-linear cost"),
    ("pglib_opf_case15_ieee", r"must be a bundled PGLib-OPF case \('pglib_opf_case14_ieee', "
                              r"'pglib_opf_case118_ieee', 'pglib_opf_case300_ieee'\).*'pglib_opf_case15_ieee'"),
    ("ieee14", r"must be the name of a pandapower built-in case.*bundled PGLib-OPF.*MATPOWER case file"),
])
def test_bad_network_entries_are_clear_config_errors(tmp_path, network, match):
    (tmp_path / "grids").mkdir()
    (tmp_path / "junk.m").write_text("function mpc = junk\nthis is not a MATPOWER case\n")
    text = PGLIB14.read_text()
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("mpc.gencost = ["))
    for row in range(5):  # piecewise-linear costs, two points (0 MW, 0 $/h) and (100 MW, 500 $/h)
        lines[start + 1 + row] = "\t1\t 0.0\t 0.0\t 2\t 0.0\t 0.0\t 100.0\t 500.0;"
    (tmp_path / "pwl.m").write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match=match):
        build({"network": network, "zones": _zones14()}, base_dir=tmp_path)


def test_edited_file_changes_the_fingerprint_and_a_resume_is_refused(tmp_path):
    from cvxdp.config.build import load_case, run_case, settings_context

    shutil.copy(PGLIB14, tmp_path / "grid.m")
    case_file = tmp_path / "c.toml"
    case_file.write_text('[case]\ntemplate = "power"\n[model]\nnetwork = "grid.m"\nzones = [[1, 2, 3, 4, 5], '
                         '[6, 7, 8, 9, 10, 11, 12, 13, 14]]\n[algorithm]\nrounds = 2\n[privacy]\nmechanism = "none"\n'
                         '[run]\nseed = 0\n')
    case = load_case(case_file)
    before = settings_context(case)[0]
    run_case(case, checkpoint=tmp_path / "out")
    assert (tmp_path / "out" / "checkpoint.pkl").exists()

    (tmp_path / "grid.m").write_text(_edit(PGLIB14.read_text(), "bus", 2, 2, "95.0"))  # a load changes
    after = settings_context(load_case(case_file))[0]
    changed = [k for k in before if before[k] != after.get(k)]
    assert changed == ["data file 'grid.m' ([model] network)"]
    with pytest.raises(CvxdpError, match="another configuration"):
        run_case(load_case(case_file), checkpoint=tmp_path / "out")


@pytest.mark.slow
def test_a_non_editable_build_ships_the_pglib_files(tmp_path):
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    proc = subprocess.run([sys.executable, "-c", "import setuptools; setuptools.setup()", "-q", "build_py",
                           "--build-lib", str(tmp_path)], cwd=root, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    shipped = {p.name for p in (tmp_path / "cvxdp_models" / "power" / "data" / "pglib").iterdir()}
    assert shipped == {f"{name}.m" for name in BUNDLED_CASES} | {"README.md"}


def test_ac_check_explains_a_net_pandapower_cannot_build(monkeypatch):
    import cvxdp_models.power.network as network

    def refuse(case):
        raise ValueError("unsupported element")

    monkeypatch.setattr(network, "_matpower_ac_net", refuse)
    case = load_network("pglib_opf_case14_ieee")
    flow = run_ac_power_flow(case, case.pmin, None)
    assert not flow.converged and np.isnan(flow.vm).all()
    assert "pandapower could not build a net from 'pglib_opf_case14_ieee'" in flow.message
    assert "ValueError: unsupported element" in flow.message


def test_explains_a_reference_generator_of_a_file_case_pushed_past_its_limits():
    from cvxdp_models.power.ac_check import explain_setpoints

    case = load_network("pglib_opf_case14_ieee")
    res = solve_central(case, "cost", penalty=None, cost_scale=1000.0)
    assert explain_setpoints(case, res["pg"], res["vm"]) == []
    heavy = case.with_loads(case.pd * 5, case.qd * 5)  # bus 1's generator would have to supply ~1200 MW
    (hint,) = explain_setpoints(heavy, res["pg"], res["vm"])
    assert "reference generator(s) must supply" in hint and "[0.0, 340.0] MW" in hint
