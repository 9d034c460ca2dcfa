"""What a party declares about an agent, public by construction: the sensitivity of its gradient
(:class:`Sensitivity`), its per-example gradients for subsampled updates (:class:`PerExample`, with the party's
:func:`poisson_sample`), and the :class:`Declaration` the coordinator reads instead of the agent, with the checks
across the agents' declarations (:func:`check_declarations`, :func:`check_public_initial`).

Split from :mod:`cvxdp.model.agent` (issue 49), which still imports its classes and checks.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import DeclarationError, check_int, fail, missing_sensitivity

__all__ = ["Declaration", "PerExample", "PublicLayout", "Sensitivity", "check_declarations", "check_public_initial",
           "poisson_sample", "rho_weights", "shared_indices"]


def shared_indices(shared: Mapping[str, np.ndarray]) -> np.ndarray:
    """All shared coordinates of a layout's ``shared`` map, key by key in sorted key order."""
    keys = sorted(shared)
    return np.concatenate([shared[k] for k in keys]) if keys else np.zeros(0, dtype=int)


def rho_weights(rho_scale: Mapping[str, Any] | None, size: int, key: str) -> np.ndarray:
    """The declared relative penalty weights of shared key ``key`` of ``size`` coordinates (ones when none)."""
    if rho_scale is None or key not in rho_scale:
        return np.ones(size)
    return np.broadcast_to(np.asarray(rho_scale[key], dtype=float), (size,)).copy()


@dataclass(frozen=True)
class Sensitivity:
    """Gradient sensitivity of an agent's objective under a declared neighbouring relation (SPEC §2.1).

    Parameters
    ----------
    l1, l2 : float or None
        ``sup_{u in W, D ~ D'} ||grad f(u; D) - grad f(u; D')||_q`` for q = 1 (Laplace) and q = 2 (Gaussian).
    relation : str
        Words naming the neighbouring relation these bounds hold for, e.g. ``"add/remove one sample"``.
    alpha : float or None
        The adjacency size used by the "paper" calibration preset (Delta = alpha for OutPert and
        2 alpha for ObjPert, Ryu & Kim §6.1.1).
    """

    l1: float | None = None
    l2: float | None = None
    relation: str = "unspecified"
    alpha: float | None = None

    def __post_init__(self) -> None:
        for name in ("l1", "l2", "alpha"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value) or value <= 0):
                raise fail(name, "Sensitivity", "a float in (0, inf) or None", value)

    def norm(self, q: int) -> float | None:
        """The l_q bound (q = 1 or 2)."""
        return self.l1 if q == 1 else self.l2


@dataclass(frozen=True)
class PerExample:
    """An agent's per-example gradients, for subsampled local updates (``sampling_rate`` of ObjG / OutG).

    The agent's objective must be ``f(u) = (1/N) sum_i l(u; record_i) + r(u)`` over its ``records`` records with a
    public normaliser ``N`` fixed across neighbours (add/remove one record) and an optional part ``r`` that reads no
    record (a regulariser). The party draws a Poisson sample ``B`` (each record in independently with probability
    q, from its own generator) and its local gradient is ``(1/(q N)) sum_{i in B} clip(grad l(u; record_i), C) +
    grad r(u)``, an unbiased estimate of the clipped full gradient; adding or removing one record moves it by at most
    ``C / (q N)`` in l2 (the mechanism's sensitivity): ``grad r`` is the same on neighbouring data sets.

    Parameters
    ----------
    records : int
        The agent's number of records (private: it stays on the party, which draws the sample).
    total : int
        The public normaliser ``N`` of the loss.
    clipped_sum : callable
        ``clipped_sum(u, index, clip) -> flat ndarray``: ``sum_{i in index} clip(grad l(u; record_i), clip)``,
        every per-example gradient rescaled to l2 norm at most ``clip`` (``u`` flat, like the agent's gradient).
    relation : str
        The neighbouring relation the sampling is accounted for: "add_remove" (the only one amplification by
        Poisson sampling is accounted under here).
    public_gradient : callable, optional
        ``public_gradient(u) -> flat ndarray``: the gradient of ``r``, the part of the objective that reads no
        record (e.g. ``reg * u`` for ``(reg/2) ||u||^2``), added to every estimate unsampled and unclipped. It must
        not read the records: it is not covered by the sensitivity.
    """

    records: int
    total: int
    clipped_sum: Callable[[np.ndarray, np.ndarray, float], np.ndarray]
    relation: str = "add_remove"
    public_gradient: Callable[[np.ndarray], np.ndarray] | None = None

    def __post_init__(self) -> None:
        check_int(self.records, "records", "PerExample", 1)
        check_int(self.total, "total", "PerExample", 1)
        if not callable(self.clipped_sum):
            raise fail("clipped_sum", "PerExample", "a callable (u, index, clip) -> flat ndarray", self.clipped_sum)
        if self.public_gradient is not None and not callable(self.public_gradient):
            raise fail("public_gradient", "PerExample", "None or a callable u -> flat ndarray", self.public_gradient)

    def public(self) -> dict[str, Any]:
        """What the coordinator may know (the agent's :class:`Declaration` carries it): ``{"total", "relation"}``."""
        return {"total": int(self.total), "relation": str(self.relation)}

    def gradient(self, u: np.ndarray, rng: np.random.Generator, q: float, clip: float) -> np.ndarray:
        """One subsampled, clipped gradient estimate at ``u`` (the sample drawn with :func:`poisson_sample`)."""
        index = poisson_sample(rng, self.records, q)
        out = np.asarray(self.clipped_sum(u, index, clip), dtype=float).ravel() if index.size else np.zeros(np.size(u))
        out = out / (q * self.total)  # a new array: the callable's own stays as it returned it
        if self.public_gradient is not None:  # the same on neighbouring data sets: no sensitivity
            out += np.asarray(self.public_gradient(u), dtype=float).ravel()
        return out


def poisson_sample(rng: np.random.Generator, n: int, q: float) -> np.ndarray:
    """Indexes of a Poisson sample of ``n`` records: each in independently with probability ``q`` (``rng`` is the
    party's own generator, never reseeded)."""
    return np.flatnonzero(rng.random(n) < q)


@dataclass(frozen=True)
class PublicLayout:
    """The public shape of an agent's flat local vector: its size and the positions of each shared block."""

    size: int
    shared: Mapping[str, np.ndarray]

    @property
    def shared_indices(self) -> np.ndarray:
        """All shared coordinates, key by key in sorted key order."""
        return shared_indices(self.shared)

    @property
    def shared_mask(self) -> np.ndarray:
        mask = np.zeros(self.size, dtype=bool)
        for idx in self.shared.values():
            mask[idx] = True
        return mask


class Declaration:
    """What a party tells the coordinator about one of its agents before round 1: public by construction.

    The name, the local vector's size and its shared blocks (keys and positions), the declared sensitivity and
    curvature bound, the declared per-block penalty weights, whether an initial point is given and declared public,
    and family-specific public facts (``facts``: the ERM constants of a graph node; a vertical party's shape, bound,
    curvature and, for the label holder, its labels). The coordinator (every family's server) reads nothing else;
    :meth:`Agent.declaration` builds it, and :meth:`to_dict` / :meth:`from_dict` carry it over a wire.
    """

    def __init__(self, name: str, size: int, shared: Mapping[str, Sequence[int]], *,
                 sensitivity: Sensitivity | None = None, lipschitz: float | None = None,
                 rho_scale: Mapping[str, Sequence[float]] | None = None, initial: bool = False,
                 initial_public: bool = False, **facts: Any) -> None:
        self.name = name
        self.layout = PublicLayout(int(size), {k: np.asarray(v, dtype=int) for k, v in shared.items()})
        self.sensitivity = sensitivity
        self.lipschitz = lipschitz
        self.rho_scale = None if rho_scale is None else {k: tuple(float(x) for x in np.ravel(v))
                                                         for k, v in rho_scale.items()}
        self.initial = True if initial else None
        self.initial_public = bool(initial_public)
        self.facts = dict(facts)

    def __getattr__(self, name: str) -> Any:  # the family-specific facts read as attributes (p.n_features, ...)
        facts = self.__dict__.get("facts", {})
        if name in facts:
            return facts[name]
        raise AttributeError(f"{type(self).__name__} {self.__dict__.get('name')!r} declares no {name!r}")

    def __repr__(self) -> str:
        return f"Declaration({self.name!r}, size={self.layout.size}, shared={sorted(self.layout.shared)})"

    def rho_weights(self, key: str) -> np.ndarray:
        """The declared relative penalty weights of shared key ``key`` (ones when none are declared)."""
        return rho_weights(self.rho_scale, len(self.layout.shared[key]), key)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (arrays as lists; :class:`Sensitivity` and dataclass facts as dicts)."""
        def plain(v: Any) -> Any:
            if isinstance(v, np.ndarray):
                return {"__array__": v.tolist()}
            if hasattr(v, "to_dict"):
                return {"__" + type(v).__name__ + "__": v.to_dict()}
            return v
        sens = self.sensitivity
        return {"name": self.name, "size": self.layout.size,
                "shared": {k: v.tolist() for k, v in self.layout.shared.items()},
                "sensitivity": None if sens is None else {"l1": sens.l1, "l2": sens.l2, "relation": sens.relation,
                                                          "alpha": sens.alpha},
                "lipschitz": self.lipschitz, "rho_scale": self.rho_scale, "initial": bool(self.initial),
                "initial_public": self.initial_public, "facts": {k: plain(v) for k, v in self.facts.items()}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], fact_types: Mapping[str, Callable[[dict], Any]] | None = None
                  ) -> Declaration:
        """Inverse of :meth:`to_dict`; ``fact_types`` rebuilds dataclass facts by type name
        (e.g. ``{"ERMConstants": lambda d: ERMConstants(**d)}``)."""
        def back(v: Any) -> Any:
            if isinstance(v, dict) and len(v) == 1:
                (key, inner), = v.items()
                if key == "__array__":
                    return np.asarray(inner)
                if key.startswith("__") and key.endswith("__") and fact_types and key[2:-2] in fact_types:
                    return fact_types[key[2:-2]](inner)
            return v
        sens = d.get("sensitivity")
        return cls(d["name"], d["size"], d["shared"], sensitivity=None if sens is None else Sensitivity(**sens),
                   lipschitz=d.get("lipschitz"), rho_scale=d.get("rho_scale"), initial=d.get("initial", False),
                   initial_public=d.get("initial_public", False),
                   **{k: back(v) for k, v in (d.get("facts") or {}).items()})


def check_declarations(agents: Sequence[Any], *, private: bool, noise: str | None = None) -> dict[str, int]:
    """Checks across the agents' public declarations: non-empty, unique names, each key the same size everywhere
    (and, for a private run, the declared sensitivity the noise needs). Returns the size of every shared key."""
    if not isinstance(agents, (list, tuple)) or len(agents) == 0:
        raise fail("agents", "solve", "a non-empty list of cvxdp.Agent", agents)
    names: set[str] = set()
    sizes: dict[str, tuple[int, str]] = {}
    for agent in agents:
        if agent.name in names:
            raise DeclarationError(f"Agent name {agent.name!r} is used twice; names must be unique.")
        names.add(agent.name)
        for key, idx in agent.layout.shared.items():
            if key in sizes and sizes[key][0] != len(idx):
                other_size, other = sizes[key]
                raise DeclarationError(f"Shared key {key!r} has size {len(idx)} in agent {agent.name!r} but "
                                       f"size {other_size} in agent {other!r}.")
            sizes.setdefault(key, (len(idx), agent.name))
        if private:
            q = 1 if noise == "laplace" else 2
            if agent.sensitivity is None or agent.sensitivity.norm(q) is None:
                raise missing_sensitivity(agent.name, f"a private run with {noise} noise", f"l{q}",
                                          agent.sensitivity, size=agent.layout.size)
    holders: dict[str, list[str]] = {}
    for agent in agents:
        for key in agent.layout.shared:
            holders.setdefault(key, []).append(agent.name)
    alone = [a.name for a in agents if all(len(holders[k]) == 1 for k in a.layout.shared)]
    if len(agents) > 1 and alone:
        keys = {a.name: sorted(a.layout.shared) for a in agents if a.name in alone}
        warnings.warn(f"Agent(s) {', '.join(map(repr, alone))} share no key with any other agent (keys: {keys}); "
                      "they run uncoupled and the consensus couples nothing. Give agents that should agree the "
                      "same shared key.", UserWarning, stacklevel=3)
    return {k: v[0] for k, v in sizes.items()}


def check_public_initial(agents: Sequence[Any]) -> None:
    """Refuse a private run whose agent starts from an undeclared ``initial`` point.

    A starting point chosen from private data (say, a local fit) leaks through the first message and no
    mechanism accounts for it. ``Agent(initial=..., initial_public=True)`` declares it data independent;
    the default start (the projection of 0 onto ``W_p``) needs no declaration.
    """
    for agent in agents:
        if getattr(agent, "initial", None) is not None and getattr(agent, "initial_public", False) is not True:
            raise DeclarationError(
                f"Agent {agent.name!r}: a private run needs a public starting point, but initial=... is not "
                "declared public. Pass initial_public=True if the point does not depend on private data, "
                "or drop initial (the default start is the projection of 0 onto the feasible set).")
