"""``cvxdp audit``: an empirical lower bound on a mechanism's epsilon, beside its claim (issue 5 item 1).

Audits the bare noise (:func:`cvxdp.audits.release.audit_mechanism`) or, with ``--through-solve``, the
realised output of one local update of a whole ``cvxdp.solve`` run
(:func:`cvxdp.audits.release.audit_local_update`) or, with ``--release-rounds R``, everything one node releases over
R rounds of a run whose data move the gradient's curvature (:func:`cvxdp.audits.release.audit_release`,
``problem="curvature"``: its rounds and ratio statistics catch noise reused across rounds), optionally on a broken
twin (``--broken``; the half-sensitivity twin's release on the shift problem, where a halved noise shows). The exit
status is 0 whenever the audit ran, whatever its verdict (the verdict is data: read ``violated``).
"""

from __future__ import annotations

import json
import math

import click

from .common import friendly_errors

_MECHANISMS = ("ObjL", "ObjG", "OutL", "OutG")


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4g}"


@click.command("audit")
@click.option("--mechanism", type=click.Choice(_MECHANISMS), required=True,
              help="Mechanism to audit.")
@click.option("--epsilon", type=float, required=True, help="Claimed per-step epsilon of the mechanism.")
@click.option("--delta", type=float, default=None, help="Per-step delta (required for ObjG / OutG).")
@click.option("--trials", type=int, default=None,
              help="Samples per neighbouring input [default: 1000000 bare (100000 with --noise-source "
                   "opendp), 20000 with --through-solve].")
@click.option("--through-solve", is_flag=True,
              help="Audit one local update of a whole cvxdp.solve run instead of the bare noise.")
@click.option("--release-rounds", type=int, default=None,
              help="Audit everything one node releases over this many rounds (>= 2) of cvxdp.solve, on the "
                   "curvature problem (the half-sensitivity twin on the shift problem), against the run's "
                   "composed (PLD) claim [trials default 10000].")
@click.option("--broken", type=click.Choice(["none", "half-sensitivity", "reused-seed"]), default="none",
              show_default=True, help="Audit a broken twin: noise calibrated to half the sensitivity, or "
                                      "one random stream reused by every run.")
@click.option("--seed", type=int, default=0, show_default=True, help="Root seed of the audit.")
@click.option("--sensitivity", type=float, default=1.0, show_default=True,
              help="Sensitivity Delta: the shift between the neighbouring inputs.")
@click.option("--noise-source", type=click.Choice(["numpy", "opendp"]), default="numpy", show_default=True,
              help="Noise sampler of the mechanism (opendp needs: pip install 'cvxdp[secure]').")
@click.option("--alpha", type=float, default=0.05, show_default=True,
              help="Failure probability of the lower bound (confidence 1 - alpha).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object as the last line.")
@friendly_errors
def audit(mechanism: str, epsilon: float, delta: float | None, trials: int | None, through_solve: bool,
          release_rounds: int | None, broken: str, seed: int, sensitivity: float, noise_source: str, alpha: float, as_json: bool) -> None:
    """Empirical epsilon lower bound of a mechanism (Clopper-Pearson, Bonferroni) beside its claim."""
    name = mechanism
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise click.BadParameter(f"must be a positive float. Got {epsilon!r}.", param_hint="--epsilon")
    if delta is not None and not 0.0 < delta < 1.0:
        raise click.BadParameter(f"must be a float in (0, 1). Got {delta!r}.", param_hint="--delta")
    if name.endswith("G") and delta is None:
        raise click.UsageError(f"{name} (Gaussian noise) needs --delta in (0, 1).")
    if trials is not None and trials < 10:
        raise click.BadParameter(f"must be an integer >= 10. Got {trials!r}.", param_hint="--trials")
    if release_rounds is not None and release_rounds < 2:
        raise click.BadParameter(f"must be an integer >= 2. Got {release_rounds!r}.", param_hint="--release-rounds")
    if release_rounds is not None and through_solve:
        raise click.UsageError("--through-solve and --release-rounds are two different audits: give one of them.")
    if seed < 0:
        raise click.BadParameter(f"must be an integer >= 0. Got {seed!r}.", param_hint="--seed")
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise click.BadParameter(f"must be a positive float. Got {sensitivity!r}.", param_hint="--sensitivity")
    if not 0.0 < alpha < 1.0:
        raise click.BadParameter(f"must be a float in (0, 1). Got {alpha!r}.", param_hint="--alpha")
    from ..audits import (  # start-up: loads the stack on use
        audit_local_update,
        audit_mechanism,
        audit_release,
        make_mechanism,
    )

    mech = make_mechanism(name, epsilon=epsilon, delta=delta, noise_source=noise_source)
    if release_rounds is not None:
        # the curvature problem cannot see a halved noise (it rescales both runs alike): that twin on the shift one
        res = audit_release(mech, rounds=release_rounds, coordinates=1, sensitivity=sensitivity,
                            trials=10_000 if trials is None else trials, seed=seed, broken=broken, alpha=alpha,
                            problem="shift" if broken == "half-sensitivity" else "curvature")
    elif through_solve:
        res = audit_local_update(mech, sensitivity=sensitivity, trials=20_000 if trials is None else trials,
                                 seed=seed, broken=broken, alpha=alpha)
    else:
        res = audit_mechanism(mech, sensitivity=sensitivity, trials=trials, seed=seed, broken=broken,
                              alpha=alpha)
    mode = "release" if release_rounds is not None else "solve" if through_solve else "mechanism"
    payload = {"mechanism": name, "epsilon": epsilon, "delta": delta, "mode": mode, "broken": broken,
               "noise_source": noise_source, "seed": seed, "sensitivity": sensitivity, **res.to_dict()}
    if as_json:
        click.echo(json.dumps(payload, default=float))
        return
    what = {"release": f"everything released over {release_rounds} rounds of cvxdp.solve, curvature problem",
            "solve": "one local update through cvxdp.solve", "mechanism": "bare noise"}[mode]
    event = ""
    if res.best_threshold is not None:
        event = f", event out {res.counts.get('event', '?')} {res.best_threshold:.4g} ({res.counts.get('direction')})"
    verdict = ("VIOLATED: the empirical lower bound exceeds the claimed epsilon" if res.violated
               else "not refuted: the empirical lower bound does not exceed the claim")
    lines = [f"audit of {name} ({what}, {noise_source} noise), {res.trials} trials per input, seed {seed}",
             f"  broken twin            {broken}",
             f"  claimed epsilon        {_fmt(res.claimed)}" + (f"  (delta {res.delta:g})" if res.delta else ""),
             f"  empirical lower bound  {_fmt(res.epsilon_lower)}  ({100 * (1 - alpha):g}% confidence; "
             f"statistic {res.statistic or 'none'}{event})",
             f"  verdict                {verdict}"]
    click.echo("\n".join(lines))
