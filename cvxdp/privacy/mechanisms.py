"""The two privacy front doors of linearized ADMM: objective and output perturbation (SPEC §2, §2.1).

Both are scikit-learn style: the constructor only stores its arguments, :meth:`validate` checks them, and
:meth:`noise_plan` turns them, for one agent, into a :class:`~cvxdp.privacy.noise.NoisePlan` (the noise of
one local update and its ``dp_accounting`` event).

Short names: ObjL / ObjG (objective perturbation, Laplace / Gaussian) and OutL / OutG (output perturbation).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from ..errors import (
    DeclarationError,
    InvalidParameterError,
    check_choice,
    check_float,
    check_int,
    fail,
    missing_sensitivity,
)
from ..params import POSITIVE, Interval, NoneValue, Options, Param, Parameterized, param
from .calibration import CALIBRATIONS, calibrate_to_total, per_step_scale, step_epsilon
from .composition import ACCOUNTANTS
from .distributions import Noise, registered, with_norm_other_than
from .noise import NOISE_SOURCES, NoisePlan, secure_scale

SENSITIVITY_MODES = ("exact", "paper")
BUDGETS = ("step", "total")


class NoiseName(Options):
    """The name of a registered noise distribution (the registry is read when a value is checked)."""

    def __init__(self) -> None:  # no field to set: the values are read from the registry
        pass

    @property  # type: ignore[override]
    def values(self) -> tuple[str, ...]:
        return tuple(noise.name for noise in registered())


class Perturbation(Parameterized):
    """Shared parameters and logic of :class:`ObjectivePerturbation` and :class:`OutputPerturbation`.

    Parameters
    ----------
    noise : {"laplace", "gaussian"}
        Laplace noise gives pure epsilon-DP per step (l1 sensitivity); Gaussian gives (epsilon, delta)-DP
        (l2 sensitivity).
    epsilon : float
        Privacy parameter in (0, inf): per local update (``calibrate="step"``) or for the whole run of each
        agent (``calibrate="total"``).
    delta : float or None
        Gaussian: required, in (0, 1). Laplace: optional; used only as the total delta at which an
        "rdp" total (``calibrate="total"``) is calibrated (pure Laplace steps have delta 0).
    calibration : {"analytic", "classic"}
        Gaussian per-step formula: the analytic Gaussian mechanism (Balle & Wang 2018, any epsilon) or the
        classic ``sqrt(2 ln(1.25/delta)) / epsilon`` bound (refused for a per-step epsilon >= 1).
    sensitivity : {"exact", "paper"}
        "exact" (default, sound): the model's declared gradient sensitivity (``agent.sensitivity.l1``/``l2``,
        derived for its relation, e.g. ``4 s alpha`` for alpha-adjacent loads with penalty ``s``), turned into
        an output sensitivity for OutPert with ``min(c)`` — the paper's alpha-adjacency scaled by the model.
        "paper": the Ryu & Kim §6.1.1 preset, Delta = 2 alpha (ObjPert) or alpha (OutPert) from
        ``agent.sensitivity.alpha``, used as is: it reproduces the published figures but ignores the
        model's relation, ``s`` and ``min(c)``, so the ledger records ``guarantee: false`` and the run warns
        once.
    calibrate : {"step", "total"}
        What epsilon/delta describe. "step": one local update (the paper's setting). "total": each agent's
        whole run; the per-step scale is then calibrated with
        :func:`~cvxdp.privacy.calibration.calibrate_to_total` over the run's steps under its accountant.
        (Not to be confused with ``solve(budget=(eps, delta))``, a stopping guard: "budget" means only that.)
    noise_source : {"numpy", "opendp"}
        "numpy" (default): numpy's Laplace/Gaussian samplers on each agent's seeded generator; fast and
        same-seed reproducible, but research-grade (textbook floating-point samplers are open to
        least-significant-bit attacks). "opendp": OpenDP's vetted discretized samplers on the operating
        system's secure randomness (``pip install 'cvxdp[secure]'``); runs are then **not reproducible
        by seed**, and the noise scale is raised where needed so that OpenDP's own privacy map certifies
        the per-step claim (a few ulps for Laplace, about 5-20 % more noise for analytic Gaussian). See
        :mod:`cvxdp.privacy.noise`.
    sampling_rate : float or None
        Subsampled local updates (Gaussian, ``calibrate="total"``, "rdp" or "pld" accountant): each local
        gradient is computed on a Poisson sample of the agent's records (each in independently with probability
        q, drawn from the party's own generator, never reseeded), every per-example gradient clipped to
        ``clip_norm`` in l2, the sum divided by ``q N`` (N the public normaliser): an unbiased estimate of the
        clipped gradient. Neighbouring relation: add/remove one record of the agent. Sensitivity: ``C / (q N)``
        in l2 for the gradient (ObjG), ``C / (q N min(c))`` for the output (OutG). Each local update is one
        ``PoissonSampledDpEvent(q, GaussianDpEvent(sigma / sensitivity))`` (amplification by sampling), and the
        noise is calibrated so that rounds x local updates of them meet the total (epsilon, delta) under the
        run's accountant. The agent must declare its per-example gradients (``cvxdp.PerExample``). The update
        keeps its linearized form (a noisy clipped-gradient step, projected onto W); what is released and
        accounted is that step's output. None (default): the full-batch gradient, the declared sensitivity.
    clip_norm : float or None
        The per-example l2 clip ``C`` of subsampled updates (required with ``sampling_rate``).
    """

    placement: ClassVar[str] = ""
    _prefix: ClassVar[str] = ""
    parameters: ClassVar[dict[str, Param]] = {
        "noise": param(NoiseName(), help="laplace (pure epsilon-DP per step) | gaussian ((epsilon, delta)-DP)"),
        "epsilon": param(POSITIVE, help="per local update (or each agent's whole run with calibrate = total)"),
        "delta": param(Interval(0.0, 1.0), NoneValue(), help="Gaussian: required, per local update (or the whole "
                       "run); Laplace: optional, the total delta of an rdp calibration"),
        "calibration": param(Options(CALIBRATIONS), help="Gaussian formula: analytic (any epsilon) | classic "
                             "(epsilon < 1)"),
        "sensitivity": param(Options(SENSITIVITY_MODES), help="exact (the model's declared sensitivity) | paper "
                             "(Ryu & Kim's preset: not a guarantee, flagged in the ledger)"),
        "calibrate": param(Options(BUDGETS), help="step: epsilon/delta per local update | total: per agent over the "
                           "run"),
        "noise_source": param(Options(NOISE_SOURCES), help="numpy (seeded, research-grade) | opendp (hardened, not "
                              "seedable)"),
        "sampling_rate": param(Interval(0.0, 1.0), NoneValue(), help="Gaussian with calibrate = total: "
                               "Poisson subsampling rate q of each local gradient (clipped per example to "
                               "clip_norm), amplification by sampling in the ledger"),
        "clip_norm": param(POSITIVE, NoneValue(), help="with sampling_rate: the per-example l2 gradient clip C"),
    }

    def __init__(self, noise: str, *, epsilon: float, delta: float | None = None,
                 calibration: str = "analytic", sensitivity: str = "exact", calibrate: str = "step",
                 noise_source: str = "numpy", sampling_rate: float | None = None,
                 clip_norm: float | None = None) -> None:
        self.noise = noise
        self.epsilon = epsilon
        self.delta = delta
        self.calibration = calibration
        self.sensitivity = sensitivity
        self.calibrate = calibrate
        self.noise_source = noise_source
        self.sampling_rate = sampling_rate
        self.clip_norm = clip_norm

    @property
    def scope(self) -> str:
        """What epsilon/delta describe: "step" or "total" (the ``calibrate`` parameter)."""
        return self.calibrate

    @property
    def distribution(self) -> Noise:
        """The noise distribution called :attr:`noise` (:class:`~cvxdp.privacy.distributions.Noise`)."""
        return Noise.from_name(self.noise, self._owner)

    def _check(self) -> None:
        owner = self._owner
        dist = self.distribution
        if not dist.pure and self.delta is None:
            raise fail("delta", owner, f"a float in (0, 1) ({type(dist).__name__} noise needs a delta)", None)
        refusal = dist.step_refusal(self.epsilon, self.calibration) if self.calibrate == "step" else None
        if refusal is not None:
            raise InvalidParameterError(f"{owner}: {refusal}")
        if self.sampling_rate is None:
            if self.clip_norm is not None:
                raise fail("clip_norm", owner, "None unless sampling_rate is set (the per-example clip of "
                           "subsampled updates)", self.clip_norm)
            return
        if not dist.subsampled or self.calibrate != "total" or self.sensitivity != "exact":
            raise InvalidParameterError(
                f"{owner}: sampling_rate={self.sampling_rate!r} needs Gaussian noise, calibrate=\"total\" and "
                f"sensitivity=\"exact\" (got noise={self.noise!r}, calibrate={self.calibrate!r}, "
                f"sensitivity={self.sensitivity!r}): amplification by sampling is accounted over the whole run.")
        if self.clip_norm is None:
            raise fail("clip_norm", owner, "a float in (0, inf), the per-example gradient clip, with sampling_rate",
                       None)
        if self.noise_source != "numpy":
            raise fail("noise_source", owner, "'numpy' with sampling_rate (the sample and the noise come from the "
                       "party's seeded generator)", self.noise_source)

    @property
    def q(self) -> int:
        """The norm of the sensitivity: 1 for Laplace noise, 2 for Gaussian."""
        return self.distribution.norm

    @property
    def short_name(self) -> str:
        """"ObjL", "ObjG", "OutL" or "OutG"."""
        return self._prefix + self.distribution.letter

    def describe(self) -> dict[str, Any]:
        """JSON-able parameters; ``mechanism_from_dict(mech.describe())`` rebuilds an equal mechanism."""
        return {"mechanism": self.short_name, "placement": self.placement, **super().describe()}

    # ------------------------------------------------------------------ calibration
    def _missing(self, agent: object, field: str, why: str = "") -> DeclarationError:
        other = with_norm_other_than(self.distribution)
        alternative = ("" if other is None else f"{type(other).__name__} noise ({self._prefix}{other.letter}: "
                       f"cvxdp.{type(self).__name__}({other.name!r}, ...))")
        layout = getattr(agent, "layout", None)
        return missing_sensitivity(getattr(agent, "name", str(agent)), f"{self.short_name}{why}", field,
                                   getattr(agent, "sensitivity", None), size=getattr(layout, "size", None),
                                   alternative=alternative)

    def _declared(self, agent: object, field: str, why: str = "") -> float:
        sens = getattr(agent, "sensitivity", None)
        value = getattr(sens, field, None) if sens is not None else None
        if value is None:
            raise self._missing(agent, field, why)
        return float(value)

    def gradient_sensitivity(self, agent: object) -> float:
        """The declared gradient sensitivity ``Delta_q`` of ``agent`` (DeclarationError if missing); with
        ``sampling_rate`` q, that of the subsampled clipped gradient, ``clip_norm / (q N)`` (add/remove one record,
        ``N`` from the agent's :class:`~cvxdp.model.agent.PerExample`)."""
        if self.sampling_rate is None:
            return self._declared(agent, f"l{self.q}")
        pe = getattr(agent, "per_example", None)  # an Agent's PerExample, or a Declaration's public dict of it
        pe = pe.public() if hasattr(pe, "public") else pe
        if pe is None:
            raise DeclarationError(f"Agent {getattr(agent, 'name', agent)!r}: {self.short_name} with sampling_rate "
                                   "needs per-example gradients: cvxdp.Agent(..., per_example=cvxdp.PerExample(...)).")
        if pe["relation"] != "add_remove":
            raise DeclarationError(f"Agent {getattr(agent, 'name', agent)!r}: {self.short_name} with sampling_rate "
                                   f"accounts amplification by sampling under add/remove one record; the agent's "
                                   f"per-example gradients declare relation={pe['relation']!r}.")
        return float(self.clip_norm) / (float(self.sampling_rate) * int(pe["total"]))

    def calibrated_sensitivity(self, agent: object, *, min_weight: float, separable: bool) -> float:
        """The sensitivity the noise of this mechanism is calibrated to, for ``agent``."""
        raise NotImplementedError

    def noise_plan(self, agent: object, *, min_weight: float, separable: bool, steps: int,
                   accountant: str) -> NoisePlan:
        """The noise of one local update of ``agent`` and its per-step claim.

        Parameters
        ----------
        agent : cvxdp.Agent
            Reads ``agent.name``, ``agent.sensitivity`` and (OutL on non-box sets) ``agent.layout.size``.
        min_weight : float
            ``min(c)`` with ``c = eta + rho [coordinate shared]``, the smallest weight of the projection
            (OutPert divides the gradient sensitivity by it).
        separable : bool
            Whether the agent's feasible set is a box (then the l1 projection bound holds as is).
        steps : int
            Mechanism calls per agent over the run (rounds x local updates); used with ``calibrate="total"``.
        accountant : {"basic", "rdp", "pld"}
            The run's accountant; used with ``calibrate="total"``.

        Returns
        -------
        NoisePlan
            With ``noise_source="opendp"``: the same claim, with the scale raised (if needed) until OpenDP's
            privacy map for ``agent.layout.size`` coordinates at the calibrated sensitivity certifies it
            (:func:`cvxdp.privacy.noise.secure_scale`); raises OptionalDependencyError without OpenDP.
        """
        self.validate()
        owner = f"{self._owner}.noise_plan"
        mw = check_float(min_weight, "min_weight", owner, 0.0, math.inf)
        st = check_int(steps, "steps", owner, 1)
        check_choice(accountant, "accountant", owner, ACCOUNTANTS)
        if not isinstance(separable, bool):
            raise fail("separable", owner, "a bool", separable)
        delta_s = self.calibrated_sensitivity(agent, min_weight=mw, separable=separable)
        sens = getattr(agent, "sensitivity", None)
        relation = getattr(sens, "relation", "unspecified")
        eps = float(self.epsilon)
        if self.calibrate == "step":
            scale = per_step_scale(self.noise, delta_s, eps, self.delta, self.calibration)
            claim = (eps, self.distribution.claim_delta(self.delta))
        elif self.sampling_rate is not None:
            if accountant == "basic":
                raise InvalidParameterError(f"{owner}: sampling_rate needs the \"rdp\" or \"pld\" accountant "
                                            "(basic composition has no amplification by sampling).")
            q = float(self.sampling_rate)
            scale = calibrate_to_total(self.noise, delta_s, eps, self.delta, st, accountant, self.calibration,
                                       sampling_rate=q)
            d_step = float(self.delta) / st
            claim = (step_epsilon(self.noise, delta_s, scale, d_step, q), d_step)
            relation = (f"add/remove one record of the agent (Poisson sample of rate {q:g}, per-example gradients "
                        f"clipped to {float(self.clip_norm):g} in l2, public normaliser N)")
            return NoisePlan(self.noise, scale, delta_s, claim[0], claim[1], relation, self.noise_source,
                             sampling_rate=q, clip_norm=float(self.clip_norm))
        else:
            scale = calibrate_to_total(self.noise, delta_s, eps, self.delta, st, accountant, self.calibration)
            if self.distribution.pure:
                claim = (step_epsilon(self.noise, delta_s, scale, 0.0), 0.0)
            elif accountant == "basic":
                claim = (eps / st, float(self.delta) / st)
            else:
                d_step = float(self.delta) / st
                claim = (step_epsilon(self.noise, delta_s, scale, d_step), d_step)
        if self.noise_source == "opendp":
            n = getattr(getattr(agent, "layout", None), "size", 1)
            n = n if isinstance(n, int) and n >= 1 else 1
            scale = secure_scale(self.noise, delta_s, scale, claim[0], claim[1], n)
        return NoisePlan(self.noise, scale, delta_s, claim[0], claim[1], relation, self.noise_source)


class ObjectivePerturbation(Perturbation):
    """Objective perturbation (ObjL / ObjG): noise on the linearized gradient inside each local update.

    ``u^j = argmin_{u in W} <g^{j-1} + xi^j, u> - <lambda, E u> + rho/2 ||B w - E u||^2 + eta/2 ||u - u^{j-1}||^2``
    (SPEC §2). The output stays feasible.

    Neighbouring relation: whatever the model declares in ``agent.sensitivity.relation`` (e.g. one bus load
    differs by at most alpha; add/remove one sample). Sensitivity: the gradient sensitivity
    ``Delta_q = sup_{u in W, D ~ D'} ||grad f(u; D) - grad f(u; D')||_q`` (q = 1 Laplace, 2 Gaussian),
    used as is; "paper" mode uses ``2 alpha`` (a paper preset: not a guarantee for the model, flagged in the
    ledger). Privacy: the update is ``u^j = Proj_{W,c}(v - (g^{j-1} + xi^j)/c)`` — a data-independent
    function (the projection) of the noisy gradient ``g^{j-1} + xi^j`` and of values already released or
    public (``u^{j-1}``, ``w``, ``lambda``). The noisy gradient is the Laplace/Gaussian mechanism on
    ``grad f(u^{j-1})``, whose sensitivity holds because ``u^{j-1}`` lies in W where ``Delta_q`` is a
    supremum (the engine evaluates the gradient at ``Proj_W(u^{j-1})``), so each update is
    post-processing of an epsilon-DP (or (epsilon, delta)-DP) release. (The map ``xi -> u^j`` is *not* a
    bijection when a constraint is active — many noise values project to the same boundary point — which
    is why the argument goes through post-processing, not a change of variables.) See
    :class:`Perturbation` for the parameters.
    """

    placement: ClassVar[str] = "objective"
    _prefix: ClassVar[str] = "Obj"

    def calibrated_sensitivity(self, agent: object, *, min_weight: float, separable: bool) -> float:
        """``Delta_q`` ("exact") or ``2 alpha`` ("paper")."""
        if self.sensitivity == "paper":
            return 2.0 * self._declared(agent, "alpha", " with sensitivity=\"paper\"")
        return self.gradient_sensitivity(agent)


class OutputPerturbation(Perturbation):
    """Output perturbation (OutL / OutG): noise added to the exact local-update output (may leave W).

    ``u^j = argmin_{u in W} (same as ObjPert without xi) + xi^j`` (SPEC §2).

    Neighbouring relation: whatever the model declares in ``agent.sensitivity.relation``. Sensitivity: the
    output sensitivity. The update is a c-weighted projection, non-expansive in the c-weighted norm, so
    ``Delta_out,2 <= Delta_2 / min(c)``; for l1 the same bound ``Delta_1 / min(c)`` holds on separable sets
    (boxes), otherwise ``sqrt(n) Delta_2 / min(c)`` is used (``Delta_2`` = declared l2, else l1 >= l2).
    The noisy output leaves W, so the next local gradient is taken at ``Proj_W(u)`` (the declared gradient
    sensitivity is a supremum over W only). "paper" mode uses ``alpha`` as is (Ryu & Kim §6.1.1; a paper
    preset, not a guarantee for the model, flagged in the ledger). See :class:`Perturbation` for the
    parameters.
    """

    placement: ClassVar[str] = "output"
    _prefix: ClassVar[str] = "Out"

    def calibrated_sensitivity(self, agent: object, *, min_weight: float, separable: bool) -> float:
        """``Delta_q / min_weight`` (or ``sqrt(n) Delta_2 / min_weight``), or ``alpha`` ("paper")."""
        if self.sensitivity == "paper":
            return self._declared(agent, "alpha", " with sensitivity=\"paper\"")
        d = self.gradient_sensitivity(agent)
        if self.q == 2 or separable:
            return d / min_weight
        sens = agent.sensitivity  # type: ignore[attr-defined]
        d2 = sens.l2 if sens.l2 is not None else d
        n = int(agent.layout.size)  # type: ignore[attr-defined]
        return math.sqrt(n) * float(d2) / min_weight


PLACEMENTS: tuple[type[Perturbation], ...] = (ObjectivePerturbation, OutputPerturbation)


def mechanisms() -> dict[str, tuple[type[Perturbation], str]]:
    """Short name -> (class, noise name) for every placement and every registered noise distribution."""
    return {cls._prefix + noise.letter: (cls, noise.name) for cls in PLACEMENTS for noise in registered()}


#: The short names of the built-in distributions ("ObjL", "ObjG", "OutL", "OutG"); :func:`mechanisms` reads the
#: registry as it stands.
MECHANISMS: dict[str, tuple[type[Perturbation], str]] = mechanisms()


def make_mechanism(name: str | None, **kwargs: Any) -> Perturbation | None:
    """Build a mechanism from its short name ("ObjL", "ObjG", "OutL", "OutG"; case-insensitive).

    ``"none"`` (or None) returns None, the non-private run. Keyword arguments are those of the
    mechanism (``epsilon``, ``delta``, ``calibration``, ``sensitivity``, ``calibrate``, ``noise_source``); the
    result is validated.
    """
    if name is None or (isinstance(name, str) and name.lower() == "none"):
        return None
    table = mechanisms()
    lookup = {k.lower(): k for k in table}
    key = lookup.get(name.lower()) if isinstance(name, str) else None
    if key is None:
        raise fail("mechanism", "make_mechanism", "one of 'none', " + ", ".join(map(repr, table)), name)
    cls, noise = table[key]
    try:
        mech = cls(noise, **kwargs)
    except TypeError as err:
        raise InvalidParameterError(f"make_mechanism({key!r}): {err}") from err
    return mech.validate()


def mechanism_from_dict(d: dict[str, Any] | None) -> Perturbation | None:
    """Inverse of :meth:`Perturbation.describe` (None -> None)."""
    if d is None:
        return None
    kw = {k: v for k, v in d.items() if k not in ("mechanism", "placement", "noise")}
    return make_mechanism(d.get("mechanism"), **kw)
