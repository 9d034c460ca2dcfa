"""``cvxdp privacy``: the accountant calculator, invoked through click's CliRunner."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cvxdp.cli.privacy_cmd import privacy
from cvxdp.privacy import calibrate_to_total, total_epsilon


def run(*args):
    return CliRunner().invoke(privacy, list(args))


def last_json(result):
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_scale_mode_reports_every_accountant():
    out = last_json(run("--noise", "gaussian", "--scale", "10", "--steps", "100", "--delta", "1e-5",
                        "--sensitivity", "2", "--json"))
    assert out["mode"] == "epsilon" and out["noise_multiplier"] == 5.0
    for acc in ("basic", "rdp", "pld"):
        assert out["epsilon"][acc] == pytest.approx(total_epsilon("gaussian", 10.0, 2.0, 100, 1e-5, acc)[0])
    assert out["epsilon"]["pld"] <= out["epsilon"]["rdp"] <= out["epsilon"]["basic"]


def test_scale_mode_pure_laplace():
    out = last_json(run("--noise", "laplace", "--scale", "4", "--steps", "10", "--json"))
    assert out["epsilon"]["basic"] == pytest.approx(2.5)
    assert out["epsilon"]["pld"] == pytest.approx(2.5)
    assert out["epsilon"]["rdp"] is None  # no finite RDP epsilon at delta = 0


def test_epsilon_mode_calibrates_under_accountant():
    out = last_json(run("--noise", "gaussian", "--epsilon", "1", "--steps", "50", "--delta", "1e-5",
                        "--accountant", "rdp", "--json"))
    assert out["mode"] == "scale" and out["accountant"] == "rdp"
    assert out["scale"] == pytest.approx(calibrate_to_total("gaussian", 1.0, 1.0, 1e-5, 50, "rdp"))
    assert out["achieved_epsilon"] <= 1.0


def test_epsilon_mode_defaults_to_pld_and_prints_text():
    res = run("--noise", "laplace", "--epsilon", "2", "--steps", "4", "--delta", "1e-6")
    assert res.exit_code == 0 and "under pld" in res.output and "per-step scale" in res.output


def test_sampling_rate_is_amplified_both_ways():
    out = last_json(run("--noise", "gaussian", "--epsilon", "1", "--steps", "400", "--delta", "1e-5",
                        "--sampling-rate", "0.1", "--json"))
    assert out["sampling_rate"] == 0.1 and 0.99 < out["achieved_epsilon"] <= 1.0
    assert out["scale"] == pytest.approx(calibrate_to_total("gaussian", 1.0, 1.0, 1e-5, 400, "pld", sampling_rate=0.1))
    back = last_json(run("--noise", "gaussian", "--scale", str(out["scale"]), "--steps", "400", "--delta", "1e-5",
                         "--sampling-rate", "0.1", "--json"))
    assert back["epsilon"]["basic"] is None  # basic composition has no amplification by sampling
    assert back["epsilon"]["pld"] == pytest.approx(out["achieved_epsilon"], rel=1e-6)
    full = last_json(run("--noise", "gaussian", "--scale", str(out["scale"]), "--steps", "400", "--delta", "1e-5",
                         "--json"))
    assert full["epsilon"]["pld"] > 10 * back["epsilon"]["pld"]


@pytest.mark.parametrize("args,match", [
    (["--noise", "gaussian", "--epsilon", "1", "--delta", "1e-5", "--sampling-rate", "0.1", "--accountant", "basic"],
     "--accountant rdp or pld"),
    (["--noise", "gaussian", "--epsilon", "1", "--delta", "1e-5", "--sampling-rate", "1.5"], "--sampling-rate"),
    (["--noise", "laplace"], "exactly one of --scale"),
    (["--noise", "laplace", "--scale", "1", "--epsilon", "1"], "exactly one of --scale"),
    (["--noise", "gaussian", "--scale", "1"], "needs --delta"),
    (["--noise", "laplace", "--scale", "1", "--accountant", "rdp"], "--accountant applies to --epsilon"),
    (["--noise", "laplace", "--epsilon", "1", "--accountant", "rdp"], "rdp needs --delta"),
    (["--noise", "laplace", "--scale", "-1"], "--scale"),
    (["--noise", "laplace", "--scale", "1", "--steps", "0"], "--steps"),
    (["--noise", "laplace", "--scale", "1", "--sensitivity", "0"], "--sensitivity"),
    (["--noise", "gaussian", "--scale", "1", "--delta", "2"], "--delta"),
    (["--noise", "cauchy", "--scale", "1"], "cauchy"),
    (["--noise", "gaussian", "--epsilon", "2", "--delta", "1e-5", "--accountant", "basic",
      "--calibration", "classic"], "analytic"),
])
def test_bad_combinations_are_clear_errors(args, match):
    res = run(*args)
    assert res.exit_code != 0
    assert match in res.output
