"""Network data: pandapower's built-in cases must equal MATPOWER's (PYPOWER's independent copies)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

pytest.importorskip("pandapower", reason="pandapower is not installed: pip install -e '.[power]'")
pytest.importorskip("pypower", reason="PYPOWER is not installed: pip install -e '.[power]'")

from cvxdp.errors import ConfigError  # noqa: E402
from cvxdp_models.power.network import (  # noqa: E402
    TAP_SIDE_ERRATA,
    case_from_matpower,
    load_case,
    make_ybus,
    run_ac_power_flow,
)

CASES = ["case14", "case57", "case118", "case300"]


def _reference(name: str):
    module = importlib.import_module(f"pypower.{name}")
    return getattr(module, name)()


@pytest.fixture(scope="module", params=CASES)
def pair(request):
    name = request.param
    return name, load_case(name), _reference(name)


def test_bus_data_matches_pypower(pair):
    name, case, ref = pair
    bus = ref["bus"]
    pos = case.bus_index(bus[:, 0].astype(int))
    base = ref["baseMVA"]
    assert case.base_mva == base
    np.testing.assert_array_equal(case.bus_type[pos], bus[:, 1].astype(int))
    for ours, col, scale in (
        (case.pd, 2, base),
        (case.qd, 3, base),
        (case.gs, 4, base),
        (case.bs, 5, base),
        (case.vmax, 11, 1.0),
        (case.vmin, 12, 1.0),
    ):
        np.testing.assert_allclose(
            ours[pos], bus[:, col] / scale, atol=1e-9, err_msg=f"{name} bus column {col}"
        )


def test_generator_data_matches_pypower(pair):
    name, case, ref = pair
    gen, base = ref["gen"], ref["baseMVA"]
    order = np.argsort(gen[:, 0], kind="stable")  # our generators are sorted by bus
    gen = gen[order]
    np.testing.assert_array_equal(case.bus_number[case.gen_bus], gen[:, 0].astype(int))
    for ours, col in ((case.pmax, 8), (case.pmin, 9), (case.qmax, 3), (case.qmin, 4)):
        np.testing.assert_allclose(ours, gen[:, col] / base, atol=1e-9, err_msg=f"{name} gen column {col}")
    np.testing.assert_allclose(case.vg, gen[:, 5])
    cost = ref["gencost"][order]
    np.testing.assert_allclose(case.gencost[:, 0], cost[:, 4] * base**2)
    np.testing.assert_allclose(case.gencost[:, 1], cost[:, 5] * base)
    np.testing.assert_allclose(case.gencost[:, 2], cost[:, 6])


def test_branch_data_matches_pypower(pair):
    """Every MATPOWER branch is found with per-unit r, x, b, rate_a, tap, shift; taps on the same side.

    A branch without tap or shift may come reversed (pandapower orients transformers high -> low voltage);
    that is the same physical branch.
    """
    name, case, ref = pair
    br = ref["branch"]
    assert case.n_branch == len(br)
    f_num, t_num = case.bus_number[case.f_bus], case.bus_number[case.t_bus]
    used: set[int] = set()
    reversed_count = 0
    for row in br:
        same = [k for k in np.flatnonzero((f_num == row[0]) & (t_num == row[1])) if k not in used]
        flipped = [k for k in np.flatnonzero((f_num == row[1]) & (t_num == row[0])) if k not in used]
        cand = same or flipped
        assert cand, f"{name}: branch {int(row[0])}-{int(row[1])} missing"
        k = min(cand, key=lambda k: abs(case.x[k] - row[3]) + abs(case.r[k] - row[2]))
        used.add(k)
        tap = row[8] if row[8] != 0 else 1.0
        if not same:
            reversed_count += 1
            assert tap == 1.0 and row[9] == 0, (
                f"{name}: tap-changing branch {int(row[0])}-{int(row[1])} reversed"
            )
        got = [
            case.r[k],
            case.x[k],
            case.b[k],
            case.rate_a[k] * ref["baseMVA"],
            case.tap[k],
            np.rad2deg(case.shift[k]),
        ]
        np.testing.assert_allclose(
            got,
            [row[2], row[3], row[4], row[5], tap, row[9]],
            atol=1e-8,
            err_msg=f"{name} branch {int(row[0])}-{int(row[1])}",
        )
    assert reversed_count < 0.2 * len(br)


def test_admittance_matrix_matches_pypower(pair):
    from pypower.ext2int import ext2int
    from pypower.makeYbus import makeYbus

    name, case, ref = pair
    internal = ext2int(ref)
    y_ref, _, _ = makeYbus(internal["baseMVA"], internal["bus"], internal["branch"])
    perm = case_from_matpower(ref, "ref").bus_index(case.bus_number)
    diff = make_ybus(case) - y_ref.tocsr()[perm][:, perm]
    assert abs(diff).max() < 1e-9


def test_known_pandapower_errors_are_corrected():
    assert len(load_case("case14").corrected_b) == 0
    assert len(load_case("case118").corrected_b) == 4
    case300 = load_case("case300")
    assert len(case300.corrected_b) == 12
    assert len(case300.corrected_tap) == len(TAP_SIDE_ERRATA["case300"]) == 16
    assert len(load_case("case57").corrected_tap) == len(TAP_SIDE_ERRATA["case57"]) == 17
    assert np.all(case300.b[list(case300.corrected_b)] > 0)


def test_case_from_matpower_equals_load_case():
    ours, ref = load_case("case14"), case_from_matpower(_reference("case14"), "case14")
    assert abs(make_ybus(ours) - make_ybus(ref)).max() < 1e-12
    np.testing.assert_allclose(ours.pd, ref.pd)


def test_arrays_are_read_only():
    case = load_case("case14")
    with pytest.raises(ValueError):
        case.pd[0] = 1.0
    scaled = case.with_loads(case.pd * 2, case.qd * 2)
    np.testing.assert_allclose(scaled.pd, 2 * case.pd)
    assert case.pd.sum() == pytest.approx(2.59)


def test_unknown_case_name_lists_valid_ones():
    with pytest.raises(ConfigError, match=r"Unknown network 'case15'.*'case14'.*'case118'"):
        load_case("case15")
    with pytest.raises(ConfigError, match="must be the name of a pandapower built-in case"):
        load_case("ieee14")
    with pytest.raises(ConfigError):
        load_case(14)  # type: ignore[arg-type]


def test_bus_index_unknown_number():
    with pytest.raises(ConfigError, match="Bus 99 is not a bus of case14"):
        load_case("case14").bus_index([1, 99])


def test_pegase_case_loads_with_linear_costs():
    case = load_case("case1354pegase")
    assert (case.n_bus, case.n_branch) == (1354, 1991)
    assert np.all(case.gencost[:, 0] == 0) and np.all(case.gencost[:, 1] > 0)
    assert np.count_nonzero(case.shift) > 0
    # MATPOWER's rateA = 0 (no limit): 495 lines and 64 transformers whose pandapower rating is a sentinel
    unlimited = np.asarray(case.unlimited)
    assert len(unlimited) == 495 + 64 and np.all(case.rate_a[unlimited] == 0)
    assert np.all(case.rate_a[np.setdiff1d(np.arange(case.n_branch), unlimited)] > 0)


def test_sentinel_ratings_mean_no_limit(monkeypatch):
    """pandapower stores "no limit" as 99999 kA (lines) and 99999 or 99.999 MVA (transformers, kVA era)."""
    from cvxdp_models.power import network

    net = network._net("case14")
    n_line = len(net.line)
    net.line.loc[net.line.index[2], "max_i_ka"] = network.UNLIMITED_RATING
    net.trafo.loc[net.trafo.index[0], "sn_mva"] = network.UNLIMITED_RATING / 1000.0
    net.trafo.loc[net.trafo.index[1], "sn_mva"] = network.UNLIMITED_RATING
    monkeypatch.setattr(network, "_net", lambda name: net)
    case = network._load_case.__wrapped__("case14")
    assert case.unlimited == (2, n_line, n_line + 1)
    assert np.all(case.rate_a[list(case.unlimited)] == 0)
    assert np.all(np.delete(case.rate_a, list(case.unlimited)) == load_case("case14").rate_a[
        np.delete(np.arange(case.n_branch), list(case.unlimited))])


@pytest.mark.parametrize("name", ["case57", "case118", "case300"])
def test_corrected_net_matches_our_admittance(name):
    """The AC check's pandapower net (errors corrected) has exactly our admittance matrix."""
    import pandapower as pp

    from cvxdp_models.power.network import _corrected_net

    case = load_case(name)
    net = _corrected_net(case)
    pp.runpp(net, trafo_model="pi", calculate_voltage_angles=True, numba=False)
    assert abs(make_ybus(case) - net._ppc["internal"]["Ybus"]).max() < 1e-9


@pytest.mark.parametrize("name", CASES)
def test_ac_power_flow_at_matpower_setpoints(name):
    """Power flow from MATPOWER's own dispatch reproduces PYPOWER's runpf (so the corrections are right)."""
    from pypower.ppoption import ppoption
    from pypower.runpf import runpf

    ref = _reference(name)
    solved, ok = runpf(ref, ppoption(VERBOSE=0, OUT_ALL=0))
    assert ok
    case = load_case(name)
    order = np.argsort(ref["gen"][:, 0], kind="stable")
    flow = run_ac_power_flow(case, ref["gen"][order, 1] / 100.0)
    assert flow.converged
    pos = case.bus_index(solved["bus"][:, 0].astype(int))
    np.testing.assert_allclose(flow.vm[pos], solved["bus"][:, 7], atol=1e-6)
    np.testing.assert_allclose(np.rad2deg(flow.va[pos]), solved["bus"][:, 8], atol=1e-4)
    on = case.gen_status
    np.testing.assert_allclose(flow.pg[on].sum(), solved["gen"][order, 1][on].sum() / 100.0, atol=1e-6)
