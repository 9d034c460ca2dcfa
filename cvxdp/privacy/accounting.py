"""The privacy ledger: what each agent spent, under basic composition, RDP and PLD (SPEC §2.2).

A :class:`PrivacyLedger` records, per agent, the items of its mechanism calls (noise plans, events or claims,
:mod:`cvxdp.privacy.events`) and reports its totals with :mod:`cvxdp.privacy.composition` (identical events grouped
and composed once, results cached, so asking for the totals every round costs milliseconds); notes record what voids
a guarantee, and a :class:`BudgetGuard` stops a run before a round that would exceed a budget. The events and the
composition are re-exported here, where they lived until issue 49.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import dp_accounting

from ..errors import (
    InvalidParameterError,
    PrivacyWarning,
    check_budget,
    check_choice,
    check_float,
    check_int,
    fail,
)

# The events and the composition were this module's first two thirds until issue 49: re-exported here, where the
# docs and older code find them.
from .composition import (  # noqa: F401
    ACCOUNTANTS,
    NEIGHBORING,
    PLD_MAX_INTERVAL,
    PLD_MIN_GAUSSIAN_MULTIPLIER,
    PLD_MIN_INTERVAL,
    PLD_RELATIVE_INTERVAL,
    SAMPLED_ESTIMATE_ORDERS,
    SAMPLED_INTERVAL_FACTOR,
    AdaptivePLDAccountant,
    CvxdpPLDAccountant,
    CvxdpRdpAccountant,
    _pld_cached,
    _rdp_cached,
    accountant_factory,
    basic_composition,
    composed_epsilon,
    pld_epsilon,
    pld_interval,
    pure_epsilon_rdp,
    rdp_accountant,
    rdp_epsilon,
)
from .events import (  # noqa: F401
    EVENT_TYPES,
    MERGE_RTOL,
    Claim,
    Event,
    Grouped,
    PureEpsilonDpEvent,
    checked_count,
    claim_of,
    event_from_dict,
    event_of,
    event_size,
    event_to_dict,
    group_events,
    multiplier_of,
    pure_epsilon_event,
    pure_epsilon_of,
    sampled_event,
)

# --------------------------------------------------------------------------- ledger
#: Below this noise multiplier (sigma / sensitivity) the PLD accountant is not run: its grid grows like
#: 1/multiplier^2 (about a second at 0.01) and the epsilon is in the thousands anyway; RDP (closed form) is reported.
MIN_PLD_MULTIPLIER = 0.05


def _finite_or_none(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _first(value: Any) -> Any:
    """The epsilon of a summary entry: ``[eps, delta]`` (basic) or ``eps``."""
    return value[0] if isinstance(value, list) else value


PAPER_PRESET = ("paper preset: reproduces the published figure; not a privacy guarantee for this model "
                "(sensitivity=\"paper\" ignores the model's relation, the penalty and min(c); use the default "
                "sensitivity=\"exact\")")
LEMMA1_PRESET = ("paper preset: reproduces the published figure; not a privacy guarantee for this model "
                 "(Hu et al.'s Lemma 1 sensitivity is invalid in general; use sensitivity=\"worst_case\")")
COROLLARY1_NOTE = ("eps_corollary1 (Hu et al.'s Corollary 1) is the paper's figure, computed from its Lemma 1 "
                   "claim; it is not a guarantee unless the per-epoch claim is")

_WARNED: set[str] = set()


def warn_once(key: str, message: str) -> None:
    """Issue ``message`` as a :class:`~cvxdp.errors.PrivacyWarning` the first time ``key`` is seen."""
    if key in _WARNED:
        return
    _WARNED.add(key)
    warnings.warn(message, PrivacyWarning, stacklevel=3)


class GuaranteeNotes:
    """Mixin of the ledgers: notes on what the recorded claim means.

    ``note(reason, voids=True)`` marks the ledger's totals as not a guarantee (``summary()["guarantee"]``
    is False); ``voids=False`` records a condition the guarantee rests on.
    """

    _notes: list[dict[str, Any]]

    def note(self, reason: str, *, voids: bool = True, warn: bool = True) -> None:
        """Record ``reason`` once; warn once per process (unless ``warn=False``)."""
        notes = self.__dict__.setdefault("_notes", [])
        if any(n["reason"] == reason for n in notes):
            return
        notes.append({"reason": str(reason), "voids": bool(voids)})
        if warn:
            warn_once(reason, ("Not a privacy guarantee: " if voids else "Conditional privacy guarantee: ")
                      + reason)

    @property
    def notes(self) -> list[dict[str, Any]]:
        return [dict(n) for n in self.__dict__.get("_notes", [])]

    @property
    def guarantee(self) -> bool:
        """False when a recorded note voids the claim."""
        return not any(n["voids"] for n in self.notes)

    def notes_summary(self) -> dict[str, Any]:
        """``{"guarantee": bool, "notes": [{"reason", "voids"}, ...]}`` for the ledger's summary."""
        return {"guarantee": self.guarantee, "notes": self.notes}

    def _restore_notes(self, d: Any) -> None:
        for n in (d.get("notes") or []) if hasattr(d, "get") else []:
            self.note(n["reason"], voids=n["voids"], warn=False)


class PrivacyLedger(GuaranteeNotes):
    """Per-agent record of the mechanism calls of a run and their composed privacy cost.

    Each agent's data are protected separately, so totals are per agent; the summary also reports the
    worst agent. Events are stored grouped (identical event and claim -> one count).

    Parameters
    ----------
    agent_names : iterable of str
        The agents whose calls are recorded (unique names).
    target_delta : float
        The delta at which RDP and PLD epsilons are reported, in [0, 1).
    """

    def __init__(self, agent_names: Iterable[str], *, target_delta: float) -> None:
        names = list(agent_names)
        if not names or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
            raise fail("agent_names", "PrivacyLedger", "a non-empty list of unique str", names)
        self.target_delta = check_float(target_delta, "target_delta", "PrivacyLedger", 0.0, 1.0, "left")
        self._entries: dict[str, dict[tuple[Event, Claim], int]] = {n: {} for n in names}

    def __repr__(self) -> str:
        return f"PrivacyLedger(agents={list(self._entries)}, target_delta={self.target_delta!r})"

    @property
    def agent_names(self) -> list[str]:
        """The agents of this ledger, in the order given."""
        return list(self._entries)

    def _name(self, agent: object) -> str:
        name = getattr(agent, "name", agent)
        if name not in self._entries:
            raise fail("agent", "PrivacyLedger", "one of " + ", ".join(map(repr, self._entries)), name)
        return name

    @staticmethod
    def _item(plan_or_event: object, claim: Claim | None) -> tuple[Event, Claim]:
        event = event_of(plan_or_event, "PrivacyLedger.record")
        c = claim_of(plan_or_event if claim is None else tuple(claim), "PrivacyLedger.record")
        return event, c

    def record(self, agent: object, plan_or_event: object, count: int = 1, *,
               claim: Claim | None = None) -> None:
        """Record ``count`` calls of a mechanism by ``agent`` (a name or an object with ``.name``).

        ``plan_or_event`` is a NoisePlan (its per-step claim is used for basic composition) or a Laplace /
        Gaussian DpEvent; a Gaussian event needs ``claim=(epsilon, delta)``.
        """
        name = self._name(agent)
        entries = self._entries[name]
        if claim is not None and type(count) is int and count >= 0:  # noqa: E721 - not bool, not numpy
            known = (plan_or_event, tuple(claim))
            if known in entries:  # the same event and claim as an earlier record (checked then): count up
                entries[known] += count
                return
        key = self._item(plan_or_event, claim)
        n = checked_count(count, "PrivacyLedger.record")
        if n:
            entries[key] = entries.get(key, 0) + n

    def record_event(self, name: object, event: Event, *, count: int = 1) -> None:
        """Record ``count`` steps of ``name`` described by a DpEvent whose claim is implied by the event.

        ``event`` is a :class:`PureEpsilonDpEvent` (claim ``(epsilon, 0)``; e.g.
        :func:`cvxdp.families.graph.mechanism.gamma_step_event`), a ``LaplaceDpEvent`` (``(1 / multiplier, 0)``) or a
        ``NoOpDpEvent`` (a step that touches no data, e.g. a recycled MR-ADMM iteration: counted by
        :meth:`free_steps`, costs nothing). A Gaussian event has no implied claim: use :meth:`record` with
        ``claim=``.
        """
        if isinstance(event, (dp_accounting.GaussianDpEvent, dp_accounting.PoissonSampledDpEvent)):
            raise InvalidParameterError(
                "PrivacyLedger.record_event: a GaussianDpEvent implies no per-step (epsilon, delta) claim; use "
                "PrivacyLedger.record(agent, plan_or_event, count, claim=(epsilon, delta)).")
        self.record(name, event, count)

    def steps(self, agent: object) -> int:
        """Number of mechanism calls recorded for ``agent`` (steps recorded as NoOp events excluded)."""
        return sum(n for (e, _), n in self._entries[self._name(agent)].items()
                   if not isinstance(e, dp_accounting.NoOpDpEvent))

    def free_steps(self, agent: object) -> int:
        """Number of steps of ``agent`` recorded as ``NoOpDpEvent`` (no data touched)."""
        return sum(n for (e, _), n in self._entries[self._name(agent)].items()
                   if isinstance(e, dp_accounting.NoOpDpEvent))

    def entries(self, agent: object) -> list[tuple[Event, Claim, int]]:
        """The grouped records of ``agent``: (event, per-step claim, count)."""
        return [(e, c, n) for (e, c), n in self._entries[self._name(agent)].items()]

    @staticmethod
    def _spent(entries: Mapping[tuple[Event, Claim], int], accountant: str, delta: float) -> Claim:
        basic = basic_composition((c, n) for (_, c), n in entries.items())
        if accountant == "basic":
            return basic
        grouped = [(e, n) for (e, _), n in entries.items()]
        eps = composed_epsilon(grouped, delta, accountant)
        if all(isinstance(e, (PureEpsilonDpEvent, dp_accounting.NoOpDpEvent)) for e, _ in entries):
            # pure-epsilon steps only: (basic epsilon, 0)-DP, hence (basic epsilon, delta)-DP too. (The same holds
            # for Laplace; not applied there, so Laplace totals stay exactly dp-accounting's.)
            eps = min(eps, basic[0])
        return eps, delta

    def spent(self, agent: object, accountant: str, *, delta: float | None = None) -> Claim:
        """Privacy spent by ``agent`` so far: (epsilon, delta).

        "basic" sums the per-step claims; "rdp"/"pld" give epsilon at ``delta`` (default the ledger's
        ``target_delta``) and that delta. An agent with no records has spent (0, 0).
        """
        check_choice(accountant, "accountant", "PrivacyLedger.spent", ACCOUNTANTS)
        at = self.target_delta if delta is None else check_float(delta, "delta", "PrivacyLedger.spent", 0.0, 1.0,
                                                                  "left")
        entries = self._entries[self._name(agent)]
        if not entries:
            return 0.0, 0.0
        return self._spent(entries, accountant, at)

    def worst_epsilon(self, accountant: str) -> float:
        """The largest epsilon :meth:`spent` by any agent; agents with the same records are composed once."""
        check_choice(accountant, "accountant", "PrivacyLedger.worst_epsilon", ACCOUNTANTS)
        totals: dict[tuple[Any, ...], float] = {}
        for entries in self._entries.values():
            key = tuple(entries.items())
            if key not in totals:
                totals[key] = self._spent(entries, accountant, self.target_delta)[0] if entries else 0.0
        return max(totals.values())

    def would_exceed(self, agent: object, plan: object, count: int = 1, budget: Claim | None = None,
                     accountant: str = "pld", *, claim: Claim | None = None, rtol: float = 1e-9) -> bool:
        """Whether recording ``count`` more calls of ``plan`` would take ``agent`` past ``budget``.

        ``budget = (epsilon, delta)``: under "basic" both totals are compared; under "rdp"/"pld" the
        epsilon at the budget's delta is compared (a relative slack ``rtol`` absorbs rounding).
        """
        check_choice(accountant, "accountant", "PrivacyLedger.would_exceed", ACCOUNTANTS)
        b_eps, b_dl = check_budget(budget, "PrivacyLedger.would_exceed")
        entries = dict(self._entries[self._name(agent)])
        key = self._item(plan, claim)
        entries[key] = entries.get(key, 0) + checked_count(count, "PrivacyLedger.would_exceed")
        eps, dl = self._spent(entries, accountant, b_dl)
        slack = 1.0 + rtol
        return eps > b_eps * slack or dl > b_dl * slack

    def repeats_within(self, agent: object, plan: object, count: int, budget: Claim, accountant: str = "pld", *,
                       claim: Claim | None = None, limit: int, rtol: float = 1e-9) -> int:
        """How many more rounds of ``count`` calls of ``plan`` fit ``agent``'s ``budget``: the largest ``k`` in
        ``[0, limit]`` for which ``would_exceed(agent, plan, k * count, budget, ...)`` is False.

        One composition when the whole ``limit`` fits, else a bisection (about ``log2(limit)`` compositions); each
        candidate is composed exactly as :meth:`would_exceed` composes it, so a guard that stops after ``k``
        rounds leaves a total that was itself checked against the budget. The bisection relies on the total growing
        with the count (it does for every accountant; a discretised PLD total is an upper bound at each count).
        """
        owner = "PrivacyLedger.repeats_within"
        n = checked_count(count, owner)
        k_max = check_int(limit, "limit", owner, 0)
        if n == 0 or k_max == 0:  # nothing to search: the arguments would_exceed checks are checked here
            check_choice(accountant, "accountant", owner, ACCOUNTANTS)
            check_budget(budget, owner)
            self._name(agent)
            self._item(plan, claim)
            return k_max

        def fits(k: int) -> bool:
            return not self.would_exceed(agent, plan, k * n, budget, accountant, claim=claim, rtol=rtol)

        if fits(k_max):
            return k_max
        lo, hi = 0, k_max  # fits(lo) is assumed (nothing more recorded), fits(hi) is False
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid)
        return lo

    def pld_feasible(self) -> bool:
        """Whether PLD is computed for this ledger: every recorded Laplace/Gaussian event has a noise multiplier of at
        least :data:`MIN_PLD_MULTIPLIER` (below it PLD's grid explodes and the epsilon is in the thousands anyway)."""
        return all(multiplier_of(e) >= MIN_PLD_MULTIPLIER for entries in self._entries.values() for (e, _) in entries)

    def summary(self, *, pld: bool | None = None) -> dict[str, Any]:
        """JSON-able totals: per agent and worst agent, for every accountant (the one summary of every family).

        ``{"per_agent": {name: {"basic": [eps, delta], "rdp": eps, "pld": eps, "steps": n, "free_steps": m}},
        "worst": {... same keys, each the max over agents ..., "agent": name with the largest PLD eps},
        "target_delta": delta, "guarantee": bool, "notes": [...]}``. Infinite epsilons are written as None (JSON
        null). ``pld``: None (default) computes PLD unless a noise multiplier is below :data:`MIN_PLD_MULTIPLIER`
        (then the PLD totals are None, a ``"note"`` says why and the worst agent is the one with the largest RDP
        epsilon); False never computes it (the worst agent is then the one with the largest basic epsilon).
        ``free_steps`` counts the steps that read no data (NoOp events, e.g. recycled MR-ADMM iterations).
        """
        skipped = pld is None and not self.pld_feasible()
        pld = (not skipped) if pld is None else bool(pld)
        per_agent: dict[str, dict[str, Any]] = {}
        for name in self._entries:
            b = self.spent(name, "basic")
            per_agent[name] = {"basic": [_finite_or_none(b[0]), b[1]],
                               "rdp": _finite_or_none(self.spent(name, "rdp")[0]),
                               "pld": _finite_or_none(self.spent(name, "pld")[0]) if pld else None,
                               "steps": self.steps(name), "free_steps": self.free_steps(name)}

        def worst(key: str) -> Any:
            vals = [v[key] for v in per_agent.values()]
            return None if any(x is None for x in vals) else max(vals)

        basic = [v["basic"] for v in per_agent.values()]
        worst_eps = None if any(b[0] is None for b in basic) else max(b[0] for b in basic)
        key = "pld" if pld else ("rdp" if skipped else "basic")
        worst_agent = max(per_agent, key=lambda n: math.inf if _first(per_agent[n][key]) is None
                          else _first(per_agent[n][key]))
        out = {"per_agent": per_agent,
               "worst": {"basic": [worst_eps, max(b[1] for b in basic)], "rdp": worst("rdp"),
                         "pld": worst("pld") if pld else None, "steps": worst("steps"),
                         "free_steps": worst("free_steps"), "agent": worst_agent},
               "target_delta": self.target_delta, **self.notes_summary()}
        if skipped:
            out["note"] = f"PLD not computed: a noise multiplier is below {MIN_PLD_MULTIPLIER}"
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-able full state; :meth:`from_dict` rebuilds an equal ledger."""
        return {"target_delta": self.target_delta, "notes": self.notes,
                "agents": {name: [{"event": event_to_dict(e), "claim": [c[0], c[1]], "count": n}
                                  for (e, c), n in entries.items()]
                           for name, entries in self._entries.items()}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PrivacyLedger:
        """Rebuild a ledger saved with :meth:`to_dict`."""
        try:
            agents = d["agents"]
            ledger = cls(list(agents), target_delta=d["target_delta"])
            for name, rows in agents.items():
                for row in rows:
                    ledger.record(name, event_from_dict(row["event"]), row["count"],
                                  claim=(row["claim"][0], row["claim"][1]))
            ledger._restore_notes(d)
        except (KeyError, TypeError, IndexError) as err:
            raise InvalidParameterError(f"PrivacyLedger.from_dict: malformed ledger dict ({err!r}).") from err
        return ledger

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PrivacyLedger):
            return NotImplemented
        return (self.target_delta == other.target_delta and self._entries == other._entries
                and self.notes == other.notes)

    __hash__ = None  # type: ignore[assignment]


class BudgetGuard:
    """The budget check of a run whose agents repeat the same charges round after round: one
    :meth:`PrivacyLedger.repeats_within` search per distinct (agent's records, charge), then a comparison of the
    round's charges with the last ones, instead of a composition per agent and round.

    Parameters
    ----------
    budget : tuple of float
        ``(epsilon, delta)`` per agent over the run.
    accountant : {"basic", "rdp", "pld"}
        The accountant the budget is checked under.
    """

    def __init__(self, budget: Claim, accountant: str) -> None:
        self.budget = check_budget(budget, "BudgetGuard")
        self.accountant = check_choice(accountant, "accountant", "BudgetGuard", ACCOUNTANTS)
        self.searches = 0  # how many searches ran (benchmarks and tests read it)
        self._fits: dict[tuple[Any, ...], int] = {}  # (records, key, its count, count, limit) -> rounds that fit
        self._charges: tuple[Any, ...] | None = None  # the charges last checked ...
        self._last_round = 0  # ... and the last round they fit every agent

    def exceeds(self, ledger: PrivacyLedger, charges: Sequence[tuple[str, object, int, Claim]], *, round: int,
                rounds: int) -> bool:
        """Whether recording round ``round``'s ``charges`` (``(agent, event, count, claim)`` each) would take some
        agent past the budget, in a run of ``rounds`` rounds whose earlier charges are recorded in ``ledger``."""
        rounds = check_int(rounds, "rounds", "BudgetGuard.exceeds", 1)
        round = check_int(round, "round", "BudgetGuard.exceeds", 1, rounds)
        key = tuple(charges)
        if key == self._charges and round <= self._last_round:  # the same charges: known to fit until then
            return False
        self._charges, fit = key, rounds - round + 1
        for agent, event, count, claim in charges:
            fit = min(fit, self._rounds_that_fit(ledger, agent, event, count, claim, rounds - round + 1))
        self._last_round = round - 1 + fit
        return fit == 0

    def _rounds_that_fit(self, ledger: PrivacyLedger, agent: str, event: object, count: int, claim: Claim,
                         limit: int) -> int:
        entries = ledger._entries[ledger._name(agent)]
        item = ledger._item(event, claim)
        others = tuple((k, v) for k, v in entries.items() if k != item)
        position = list(entries).index(item) if item in entries else len(entries)  # the composition's order
        cache = (others, position, item, entries.get(item, 0), count, limit)  # agents with equal records share it
        if cache not in self._fits:
            self.searches += 1
            self._fits[cache] = ledger.repeats_within(agent, event, count, self.budget, self.accountant, claim=claim,
                                                      limit=limit)
        return self._fits[cache]


def ledger_from_dict(d: Mapping[str, Any]) -> PrivacyLedger:
    """A :class:`PrivacyLedger` from its :meth:`~PrivacyLedger.to_dict`, or from the per-iteration format that graph
    runs were saved in before there was one ledger (``"cvxdp-gamma-ledger/1"``: one pure-epsilon claim per
    iteration, 0 for a recycled one), converted: a pure-epsilon event per claim, a NoOp event per recycled step."""
    if not (isinstance(d, Mapping) and d.get("format") == "cvxdp-gamma-ledger/1"):
        return PrivacyLedger.from_dict(d)
    try:
        ledger = PrivacyLedger(list(d["agents"]), target_delta=d["target_delta"])
        for name, steps in d["agents"].items():
            for _, eps in steps:
                event = dp_accounting.NoOpDpEvent() if float(eps) == 0.0 else pure_epsilon_event(float(eps))
                ledger.record(name, event, 1)
        ledger._restore_notes(d)
    except (KeyError, TypeError, ValueError) as err:
        raise InvalidParameterError(f"ledger_from_dict: malformed graph ledger dict ({err!r}).") from err
    return ledger
