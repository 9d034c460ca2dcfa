"""A party's own privacy policy: what it releases, what it spends, and the public values it accepts.

A party file declares it in three tables, and nothing a coordinator sends can change it::

    [privacy]                  # what this party releases (the same keys as a case file's [privacy])
    mechanism = "ObjG"         # ObjL | ObjG | OutL | OutG | gamma | none (OutG also runs ADMM sharing)
    epsilon = 1.0
    delta = 1e-6
    # calibrate = "total"      # epsilon/delta per local update ("step") or over each run ("total")
    accountant = "pld"         # composes its ledger, and spreads a "total" over a run's steps
    # algorithms = ["ladmm"]   # the algorithms it takes part in (default: every one that runs the mechanism)

    [budget]                   # optional: its lifetime budget on this data set, across every run and token
    epsilon = 4.0
    delta = 1e-5

    [limits]                   # optional: bounds on what a coordinator may ask
    rounds = 10000             # rounds (epochs) of one run
    eta = [1e-6, 1e6]          # LinearizedADMM's and the graph family's penalty eta of any round
    rho = [1e-6, 1e6]
    message_bytes = 268435456  # a larger request is refused before it is read
    lock_timeout = 300.0       # seconds after which a silent coordinator's hold on a run lapses

The party computes its noise from its own declared sensitivity and this policy (each node calibrates its own plan,
:mod:`cvxdp.families`); a coordinator's start is accepted only if it names an algorithm the policy allows, with
parameters inside their declared constraints and these limits, and if its [privacy] table and accountant are the
policy's (:meth:`PartyPolicy.accept`). Any other request is refused with one line naming the party and the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, CvxdpError, PartyRefusedError, check_choice, check_float, check_int
from ..families.catalog import ALGORITHMS, MECHANISMS, algorithm_from_table, mechanism_from_table
from ..params import Algorithm
from ..privacy import ACCOUNTANTS

POLICY_KEYS = {"accountant", "algorithms"}
BUDGET_KEYS = {"epsilon", "delta"}
LIMIT_KEYS = {"rounds", "eta", "rho", "message_bytes", "lock_timeout"}


@dataclass(frozen=True)
class Limits:
    """Bounds on the public values a coordinator may send (see the module docstring)."""

    rounds: int = 100_000
    eta: tuple[float, float] = (0.0, math.inf)
    rho: tuple[float, float] = (0.0, math.inf)
    message_bytes: int = 1 << 28
    lock_timeout: float = 300.0

    @classmethod
    def from_table(cls, table: Mapping[str, Any], where: str) -> Limits:
        unknown = sorted(set(table) - LIMIT_KEYS)
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))} in [limits]. Allowed: "
                              f"{', '.join(sorted(LIMIT_KEYS))}.")
        owner = f"[limits] of {where}"
        kw: dict[str, Any] = {}
        if "rounds" in table:
            kw["rounds"] = check_int(table["rounds"], "rounds", owner, 1)
        for key in ("eta", "rho"):
            if key in table:
                pair = table[key]
                if not isinstance(pair, list) or len(pair) != 2:
                    raise ConfigError(f"{owner}: {key} must be [low, high]. Got {pair!r} instead.")
                lo = check_float(pair[0], f"{key}[0]", owner, 0.0, math.inf, closed="left")
                hi = check_float(pair[1], f"{key}[1]", owner, lo, math.inf, closed="right")
                kw[key] = (lo, hi)
        if "message_bytes" in table:
            kw["message_bytes"] = check_int(table["message_bytes"], "message_bytes", owner, 1024)
        if "lock_timeout" in table:
            kw["lock_timeout"] = check_float(table["lock_timeout"], "lock_timeout", owner, 0.0, math.inf)
        return cls(**kw)

    def check_rounds(self, rounds: int, *, party: str) -> None:
        """Refuse a run of more rounds than the party's limit."""
        if rounds > self.rounds:
            raise PartyRefusedError(f"Party {party!r} refuses the run: the coordinator asks for {rounds} rounds; its "
                                    f"limit is {self.rounds}.", party=party, round=0, reason="limits",
                                    field="algorithm.rounds")

    def check_weight(self, name: str, value: float, *, party: str, round: int, field: str) -> None:
        """Refuse a round whose eta or rho lies outside the party's bounds."""
        lo, hi = getattr(self, name)
        if not lo < value <= hi:
            raise PartyRefusedError(f"Party {party!r} refuses round {round}: {name} = {value:g} lies outside its "
                                    f"limits ({lo:g}, {hi:g}] (field {field!r}).", party=party, round=round,
                                    reason="limits", field=field)


class PartyPolicy:
    """A party's own policy (see the module docstring), validated from its party file's tables.

    Attributes
    ----------
    privacy : dict
        The [privacy] table's mechanism keys (``mechanism`` and that mechanism's own parameters).
    accountant : str
    algorithms : tuple of str or None
    budget : (float, float) or None
        The lifetime budget on this party's data set.
    limits : Limits
    """

    def __init__(self, privacy: Mapping[str, Any] | None, budget: Mapping[str, Any] | None,
                 limits: Mapping[str, Any] | None, where: str) -> None:
        if privacy is None:
            raise ConfigError(f"{where}: no [privacy] table. A party declares its own privacy policy: the mechanism it "
                              "runs and its parameters (mechanism = \"ObjG\", epsilon = 1.0, delta = 1e-6, ...), or "
                              "mechanism = \"none\" to take part in non-private runs only (docs/federation.md).")
        table = dict(privacy)
        if "mechanism" not in table:
            raise ConfigError(f"{where}: [privacy] needs a 'mechanism' (one of 'none', "
                              + ", ".join(map(repr, MECHANISMS)) + ").")
        owner = f"[privacy] of {where}"
        self.accountant = check_choice(table.pop("accountant", "pld"), "accountant", owner, ACCOUNTANTS)
        algorithms = table.pop("algorithms", None)
        if algorithms is not None:
            if not isinstance(algorithms, list) or not algorithms:
                raise ConfigError(f"{owner}: algorithms must be a list of algorithm names. Got {algorithms!r}.")
            for name in algorithms:
                check_choice(name, "algorithms", owner, ALGORITHMS)
        self.algorithms = None if algorithms is None else tuple(algorithms)
        self.privacy = table
        try:
            self._mechanism = self._build(table, where)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        if budget is not None:
            unknown = sorted(set(budget) - BUDGET_KEYS)
            if unknown or "epsilon" not in budget:
                raise ConfigError(f"{where}: [budget] holds epsilon (required) and delta. Got "
                                  f"{', '.join(map(repr, sorted(budget)))}.")
            eps = check_float(budget["epsilon"], "epsilon", f"[budget] of {where}", 0.0, math.inf)
            delta = check_float(budget.get("delta", 0.0), "delta", f"[budget] of {where}", 0.0, 1.0, closed="left")
            self.budget: tuple[float, float] | None = (eps, delta)
        else:
            self.budget = None
        self.limits = Limits.from_table(limits or {}, where)

    @staticmethod
    def _build(table: Mapping[str, Any], where: str) -> Any:
        """The policy's mechanism; a graph policy's ``alpha`` may be one value or a table by agent name."""
        if table.get("mechanism") == "gamma" and isinstance(table.get("alpha"), dict):
            alphas = table["alpha"]
            return {name: mechanism_from_table({**table, "alpha": value}, "[privacy]")
                    for name, value in alphas.items()}
        return mechanism_from_table(table, "[privacy]")

    @property
    def mechanism_name(self) -> str:
        return str(self.privacy["mechanism"])

    @property
    def private(self) -> bool:
        return self.mechanism_name != "none"

    def mechanism_for(self, agent: str, *, party: str) -> Any:
        """The mechanism of agent ``agent`` (None: non-private): a graph policy's alpha may differ per agent."""
        mech = self._mechanism
        if isinstance(mech, dict):
            if agent not in mech:
                raise ConfigError(f"Party {party!r}: its [privacy] alpha table has no entry for agent {agent!r}.")
            return mech[agent]
        return mech

    def describe(self) -> dict[str, Any]:
        """The policy's public part (what the party tells a coordinator in its hello)."""
        return {"privacy": dict(self.privacy), "accountant": self.accountant,
                "algorithms": None if self.algorithms is None else list(self.algorithms)}

    # ---------------------------------------------------------------- a coordinator's start
    def accept(self, algorithm: Mapping[str, Any], privacy: Mapping[str, Any], accountant: str, *,
               party: str) -> Algorithm:
        """The coordinator's algorithm, if this policy runs it: refused (one line naming the party and the field)
        when it is not an algorithm the policy allows, its parameters break their declared constraints or the
        limits, or the coordinator's [privacy] table or accountant is not the policy's."""
        def refuse(message: str, field: str, reason: str = "policy") -> PartyRefusedError:
            return PartyRefusedError(f"Party {party!r} refuses the run: {message}", party=party, round=0,
                                     reason=reason, field=field)

        try:
            alg = algorithm_from_table(algorithm, "the coordinator's [algorithm]")
        except CvxdpError as exc:
            raise refuse(str(exc), "algorithm") from None
        name = alg.name
        if self.algorithms is not None and name not in self.algorithms:
            raise refuse(f"its policy takes part in {', '.join(self.algorithms)} only; the coordinator asks for "
                         f"{name!r}.", "algorithm.name")
        if self.mechanism_name not in type(alg).mechanisms:
            raise refuse(f"its policy runs {self.mechanism_name!r}; {name!r} runs "
                         f"{', '.join(type(alg).mechanisms)}.", "algorithm.name")
        self.limits.check_rounds(int(getattr(alg, "rounds", None) or getattr(alg, "epochs", 0)), party=party)
        theirs = dict(privacy)
        if theirs.get("mechanism", "none") != self.mechanism_name:
            raise refuse(f"the coordinator's [privacy] mechanism is {theirs.get('mechanism', 'none')!r}; its own "
                         f"policy's is {self.mechanism_name!r}.", "privacy.mechanism")
        try:
            mine = self._describe(self.privacy)
            given = self._describe(theirs)
        except CvxdpError as exc:
            raise refuse(f"the coordinator's [privacy] table: {exc}", "privacy") from None
        for key in sorted(set(mine) | set(given)):
            if mine.get(key) != given.get(key):
                raise refuse(f"the coordinator's [privacy] {key} is {given.get(key)!r}; its own policy's is "
                             f"{mine.get(key)!r}.", f"privacy.{key}")
        if accountant != self.accountant:
            raise refuse(f"the coordinator's accountant is {accountant!r}; its own policy's is {self.accountant!r}.",
                         "accountant")
        return alg

    @staticmethod
    def _describe(table: Mapping[str, Any]) -> dict[str, Any]:
        """A [privacy] table with every default filled in (two tables that describe one mechanism compare equal). A
        graph mechanism's ``alpha`` is left out: it is per node, and each node compares the coordinator's rate of every
        iteration with its own (:meth:`cvxdp.families.graph.node.GraphNode.check_message`)."""
        table = dict(table)
        if table.get("mechanism") == "gamma":
            table["alpha"] = 1.0
            described = mechanism_from_table(table, "[privacy]").describe()
            described.pop("alpha", None)
            return described
        mech = mechanism_from_table(table, "[privacy]")
        return {} if mech is None else mech.describe()


__all__ = ["Limits", "PartyPolicy"]
