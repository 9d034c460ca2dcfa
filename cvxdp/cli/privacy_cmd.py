"""``cvxdp privacy``: the accountant calculator (SPEC §8).

Either ``--scale`` (what does this much noise cost over ``--steps`` calls, under every accountant?) or
``--epsilon`` (which per-step noise meets this total under ``--accountant``?).
"""

from __future__ import annotations

import json
import math
from typing import Any

import click

from .common import friendly_errors


def _num(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.6g}"


def _epsilons(total_epsilon, noise: str, scale: float, sensitivity: float, steps: int, delta: float | None,
              sampling_rate: float | None = None) -> dict:
    out: dict[str, Any] = {}
    for acc in ("basic", "rdp", "pld"):
        if (acc == "rdp" and not delta) or (acc == "basic" and sampling_rate is not None and sampling_rate < 1):
            out[acc] = None  # RDP certifies no finite epsilon at delta = 0; basic composition has no amplification
            continue
        out[acc] = _num(total_epsilon(noise, scale, sensitivity, steps, delta, acc, sampling_rate)[0])
    return out


@click.command("privacy")
@click.option("--noise", type=click.Choice(["laplace", "gaussian"]), required=True, help="Noise distribution.")
@click.option("--sensitivity", type=float, default=1.0, show_default=True,
              help="l1 (Laplace) or l2 (Gaussian) sensitivity of one call.")
@click.option("--steps", type=int, default=1, show_default=True, help="Number of composed calls.")
@click.option("--delta", type=float, default=None, help="Total delta (required for Gaussian noise).")
@click.option("--scale", type=float, default=None, help="Per-step noise scale (Laplace b or Gaussian sigma): "
              "print the total epsilon under basic, RDP and PLD accounting.")
@click.option("--epsilon", type=float, default=None, help="Target total epsilon: print the per-step scale "
              "that meets it under --accountant.")
@click.option("--accountant", type=click.Choice(["basic", "rdp", "pld"]), default=None,
              help="Accountant for --epsilon (default pld).")
@click.option("--sampling-rate", "sampling_rate", type=float, default=None,
              help="Poisson subsampling rate q in (0, 1] of every call (amplification by sampling: "
              "PoissonSampledDpEvent; rdp or pld).")
@click.option("--calibration", type=click.Choice(["analytic", "classic"]), default="analytic",
              show_default=True, help="Per-step Gaussian formula for --accountant basic.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object as the last line.")
@friendly_errors
def privacy(noise: str, sensitivity: float, steps: int, delta: float | None, scale: float | None,
            epsilon: float | None, accountant: str | None, sampling_rate: float | None, calibration: str,
            as_json: bool) -> None:
    """Accountant calculator: epsilon for given noise (--scale), or noise for a target (--epsilon)."""
    if (scale is None) == (epsilon is None):
        raise click.UsageError("Give exactly one of --scale (to get epsilon) or --epsilon (to get the scale).")
    if scale is not None and accountant is not None:
        raise click.UsageError("--accountant applies to --epsilon only; --scale reports every accountant.")
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise click.BadParameter(f"must be a positive float. Got {sensitivity!r}.", param_hint="--sensitivity")
    if steps < 1:
        raise click.BadParameter(f"must be an integer >= 1. Got {steps!r}.", param_hint="--steps")
    if delta is not None and not 0.0 <= delta < 1.0:
        raise click.BadParameter(f"must be a float in [0, 1). Got {delta!r}.", param_hint="--delta")
    if sampling_rate is not None and not (math.isfinite(sampling_rate) and 0.0 < sampling_rate <= 1.0):
        raise click.BadParameter(f"must be a float in (0, 1]. Got {sampling_rate!r}.", param_hint="--sampling-rate")
    if sampling_rate is not None and sampling_rate < 1.0 and accountant == "basic":
        raise click.UsageError("--sampling-rate needs --accountant rdp or pld (basic composition has no "
                               "amplification by sampling).")
    for name, value in (("--scale", scale), ("--epsilon", epsilon)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise click.BadParameter(f"must be a positive float. Got {value!r}.", param_hint=name)
    acc = accountant or "pld"
    # the accountants (dp-accounting, scipy) load only once the arguments are valid
    from ..privacy import (  # start-up: the accountants load once the arguments are valid
        Noise,
        calibrate_to_total,
        total_epsilon,
    )

    distribution = Noise.from_name(noise, "cvxdp privacy")
    if not distribution.pure and not delta:
        raise click.UsageError(f"{type(distribution).__name__} noise needs --delta in (0, 1).")
    if scale is None and acc == "rdp" and not delta:
        raise click.UsageError("--accountant rdp needs --delta > 0 (RDP certifies no epsilon at delta = 0).")

    sampled = f" on Poisson samples (rate {sampling_rate:g})" if sampling_rate is not None else ""
    if scale is not None:
        eps = _epsilons(total_epsilon, noise, scale, sensitivity, steps, delta, sampling_rate)
        payload = {"mode": "epsilon", "noise": noise, "scale": scale, "sensitivity": sensitivity,
                   "noise_multiplier": scale / sensitivity, "steps": steps, "delta": delta or 0.0,
                   "sampling_rate": sampling_rate, "epsilon": eps}
        lines = [f"{noise} noise, scale {scale:g}, sensitivity {sensitivity:g} "
                 f"(noise multiplier {scale / sensitivity:.6g}), {steps} step(s){sampled}, delta {delta or 0.0:g}:"]
        lines += [f"  {k:5s} epsilon = {_fmt(v)}" for k, v in eps.items()]
    else:
        assert epsilon is not None
        s = calibrate_to_total(noise, sensitivity, epsilon, delta, steps, acc, calibration, sampling_rate)
        achieved = total_epsilon(noise, s, sensitivity, steps, delta, acc, sampling_rate)[0]
        payload = {"mode": "scale", "noise": noise, "epsilon": epsilon, "delta": delta or 0.0,
                   "steps": steps, "sampling_rate": sampling_rate, "accountant": acc,
                   "sensitivity": sensitivity, "scale": s,
                   "noise_multiplier": s / sensitivity, "achieved_epsilon": _num(achieved)}
        lines = [f"{noise} noise meeting total (epsilon {epsilon:g}, delta {delta or 0.0:g}) over {steps} "
                 f"step(s){sampled} under {acc}:",
                 f"  per-step scale = {s:.6g} (noise multiplier {s / sensitivity:.6g})",
                 f"  achieved epsilon = {_fmt(_num(achieved))}"]
    click.echo(json.dumps(payload) if as_json else "\n".join(lines))
