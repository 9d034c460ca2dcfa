"""Vertically partitioned learning: parties, the x-update, the privacy plan and audits of ADMM sharing (SPEC §5).

The epochs run on the one round loop (:mod:`cvxdp.run.loop`) through :class:`cvxdp.families.sharing.server.SharingFamily`.

Declaration: a party is a :class:`VerticalParty` (a :class:`cvxdp.Agent`) holding its private feature block
``D_m`` as a ``cp.Parameter`` (``party.features``), its local model ``x_m`` (a ``cp.Variable``), its
regulariser ``R_m`` (the agent's objective; default ``||x_m||^2 / 2``) and its feasible set ``X_m`` (the
agent's constraints: the l2 ball ``||x_m|| <= bound`` that the privacy analysis needs, plus any of yours).
One party may also hold the labels (the "active" party, which then hosts the centre).

    parties = [cvxdp.VerticalParty("bank", D1, bound=10.0, labels=y, test_features=T1, test_labels=y_test),
               cvxdp.VerticalParty("shop", D2, bound=10.0, test_features=T2)]
    result = cvxdp.solve(parties, algorithm=cvxdp.ADMMSharing(rho=2e-3, lam=1e-3, epochs=50),
                         privacy=cvxdp.SharingGaussian(epsilon=0.5, delta=1e-5), seed=0)
    result.solution["bank"]        # x_bank (it stays with the bank in a deployment)

What crosses the wire (Algorithm 1): each epoch, party m pushes **one array of N numbers**,
``q_m = D_m x_m + N(0, sigma_m^2 I_N)``; the centre broadcasts ``sum_k q_k - z`` and ``y`` (N numbers each).
Nothing else leaves a party: the x-update runs on the party's own data against the pulled values
(subtract-own-contribution trick, Algorithm 1 lines 3-4). ``result.agent_history`` records the size of
every uplink; ``ADMMSharing(record_messages=True)`` keeps the messages themselves in ``result.messages``.
The training objective and test log-loss in the history are *non-private evaluation* of the simulation
(computed by the parties' ``evaluate``, on their private models; off with ``solve(..., evaluate=False)``);
they are not messages.

The x-update (6) is solved in closed form (eigen-decomposition of ``D_m^T D_m`` once, then a trust-region
secular equation per epoch) when ``R_m`` is the default ``||x||^2/2`` and ``X_m`` is the ball alone; otherwise
a CVXPY problem in d_m variables is compiled once (``g = D_m^T (y + rho s_m)`` is its only Parameter; DPP,
warm-started) and solved with the solver fallback chain.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import cvxpy as cp
import numpy as np

from ..errors import DeclarationError, check_float, convexity_advice, fail
from .agent import Agent
from .declaration import Declaration
from .evaluation import compiled_metrics

RELATION = "one sample's feature row of D_m replaced (||D_m - D'_m|| <= 1; rows of l2 norm <= 1)"
ROW_NORM_TOL = 1e-9


# --------------------------------------------------------------------------- declaration
class VerticalParty(Agent):
    """One party of a vertically partitioned problem: a feature block, a local model, a regulariser, a set.

    Parameters
    ----------
    name : str
        Unique party name (ledger, history, ``result.solution`` key).
    features : ndarray (N, d_m) or cvxpy.Parameter
        The private block ``D_m``; stored as the Parameter ``party.features`` (its value is the data).
        The privacy analysis needs every row to have l2 norm at most 1 (Assumption 1.3), checked before a
        private run (``cvxdp_models.vertical.normalize_blocks`` rescales rows).
    variable : cvxpy.Variable (d_m,), optional
        The local model ``x_m``; created as ``cp.Variable(d_m, name="x_<name>")`` when omitted.
    regularizer : cvxpy.Expression, optional
        ``R_m(x_m)``, convex in ``variable`` only; default ``0.5 * cp.sum_squares(x_m)`` (curvature 1).
    bound : float, optional
        Radius b of the ball ``||x_m||_2 <= b`` added to the constraints (Assumption 1.1; required for a
        private run).
    constraints : sequence of cvxpy.Constraint
        Further constraints on ``x_m`` (they switch the x-update from the closed form to a compiled solve).
    curvature : float, optional
        ``c1`` with ``|R_m''| <= c1``; needed for a private run with a custom regulariser (Lemma 1).
    test_features : ndarray (N_test, d_m), optional
        The party's block of a test set, for the ``test_logloss`` column (evaluation only).
    labels, test_labels : array, optional
        Declare this party the label holder (it hosts the centre); see :class:`cvxdp.ADMMSharing`.
    refusal : str, optional
        Why no per-party privacy analysis holds for these features (e.g. a preprocessing step that mixed other
        parties' data into them); a private run is then refused with this reason, a non-private run is unaffected.
        Set by templates (``cvxdp_models.vertical``: ``normalize = "sample"``).
    """

    def __init__(self, name: str, features: np.ndarray | cp.Parameter, variable: cp.Variable | None = None, *,
                 regularizer: cp.Expression | None = None, bound: float | None = None,
                 constraints: Sequence[cp.Constraint] = (), curvature: float | None = None,
                 test_features: np.ndarray | None = None, labels: np.ndarray | None = None,
                 test_labels: np.ndarray | None = None, refusal: str | None = None) -> None:
        if refusal is not None and (not isinstance(refusal, str) or not refusal.strip()):
            raise fail("refusal", f"VerticalParty {name!r}", "None or a non-empty str (the reason)", refusal)
        self.refusal = refusal
        if isinstance(features, cp.Parameter):
            param = features
        else:
            if np.iscomplexobj(features):  # a cast to float would drop the imaginary part silently
                raise fail("features", "VerticalParty", "a 2-D array of real numbers", "a complex array")
            try:
                value = np.asarray(features.toarray() if hasattr(features, "toarray") else features, dtype=float)
            except (TypeError, ValueError):
                raise fail("features", "VerticalParty", "a 2-D array of numbers or a cvxpy Parameter",
                           type(features).__name__) from None
            if value.ndim != 2 or value.shape[0] == 0 or value.shape[1] == 0:
                raise fail("features", "VerticalParty", "a non-empty 2-D array (samples x features)",
                           f"an array of shape {value.shape}")
            param = cp.Parameter(value.shape, value=value, name=f"D_{name}")
        if param.ndim != 2:
            raise fail("features", "VerticalParty", "a 2-D (samples x features) Parameter", param.shape)
        if variable is None:
            variable = cp.Variable(param.shape[1], name=f"x_{name}")
        self.features = param
        self.variable = variable
        self.bound = bound
        self.curvature = curvature
        self.test_features = None if test_features is None else np.asarray(test_features, dtype=float)
        self.labels = labels
        self.test_labels = test_labels
        self.default_regularizer = regularizer is None
        self.extra_constraints = list(constraints)
        objective = 0.5 * cp.sum_squares(variable) if regularizer is None else regularizer
        ball = [] if bound is None or not _is_number(bound) else [cp.norm(variable, 2) <= float(bound)]
        super().__init__(name, objective, ball + self.extra_constraints, shared={})

    def __repr__(self) -> str:
        return (f"VerticalParty({self.name!r}, samples={self.n_samples}, features={self.n_features}, "
                f"bound={self.bound!r})")

    # ------------------------------------------------------------------ properties
    @property
    def n_samples(self) -> int:
        return int(self.features.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.features.shape[1])

    @property
    def data(self) -> np.ndarray:
        """The value of ``features`` (the private block ``D_m``)."""
        return np.asarray(self.features.value, dtype=float)

    @property
    def c1(self) -> float | None:
        """The regulariser's curvature bound: 1 for the default ``||x||^2/2``, else the declared ``curvature``."""
        if self.curvature is not None:
            return float(self.curvature)
        return 1.0 if self.default_regularizer else None

    @property
    def closed_form(self) -> bool:
        """Whether the x-update has the closed (trust-region) form: default regulariser, ball constraint only."""
        return self.default_regularizer and not self.extra_constraints

    @property
    def holds_labels(self) -> bool:
        return self.labels is not None

    def regularizer_value(self, x: np.ndarray) -> float:
        """``R_m(x)``."""
        if self.default_regularizer:
            return 0.5 * float(x @ x)
        return compiled_metrics(self).objective(np.asarray(x, dtype=float))  # no CVXPY tree walk

    def declaration(self) -> Declaration:
        """The party's public declaration: its shape, bound and curvature and, for the label holder, the labels
        it gives the centre (the paper's centre holds the labels: they are public to it)."""
        test = None if self.test_features is None else int(self.test_features.shape[0])
        return Declaration(self.name, self.n_features, {}, sensitivity=self.sensitivity, kind="vertical",
                           n_samples=self.n_samples, n_features=self.n_features, bound=self.bound, c1=self.c1,
                           closed_form=self.closed_form, holds_labels=self.holds_labels, labels=self.labels,
                           test_labels=self.test_labels, test_samples=test)

    # ------------------------------------------------------------------ checks
    def check(self) -> None:
        """Structural checks of the declaration (raises :class:`DeclarationError` naming the party)."""
        if not isinstance(self.name, str) or not self.name:
            raise fail("name", "VerticalParty", "a non-empty str", self.name)
        value = self.features.value
        if value is None:
            raise self._fail("the features Parameter has no value.")
        if not np.all(np.isfinite(value)):
            raise self._fail("the features hold NaN or infinite values.")
        x = self.variable
        if not isinstance(x, cp.Variable) or x.ndim != 1 or x.size != self.n_features:
            raise self._fail(f"'variable' must be a 1-D cvxpy Variable of size {self.n_features} (one entry per "
                             f"feature). Got {x!r}.")
        if not isinstance(self.objective, cp.Expression) or not self.objective.is_scalar():
            raise self._fail("the regularizer must be a scalar cvxpy Expression.")
        self._check_kinds()  # integer, boolean, complex variables and data
        if not self.objective.is_convex():
            raise self._fail("the regularizer is not convex under CVXPY's DCP rules: "
                             f"{convexity_advice(self.objective)}")
        for k, con in enumerate(self.constraints):
            if not isinstance(con, cp.constraints.constraint.Constraint):
                raise self._fail(f"constraint {k} is not a cvxpy Constraint. Got {type(con).__name__}.")
            if not con.is_dcp():
                raise self._fail(f"constraint {k} ({con}) does not follow CVXPY's DCP rules.")
        if not set(self.problem.variables()) <= {x}:
            raise self._fail("the regularizer and constraints may use the party's variable only.")
        if self.bound is not None:
            check_float(self.bound, "bound", f"VerticalParty {self.name!r}", 0.0, math.inf)
        if self.curvature is not None:
            check_float(self.curvature, "curvature", f"VerticalParty {self.name!r}", 0.0, math.inf, closed="left")
        if self.test_features is not None and (self.test_features.ndim != 2
                                               or self.test_features.shape[1] != self.n_features):
            raise self._fail(f"test_features must have shape (n_test, {self.n_features}). "
                             f"Got {self.test_features.shape}.")

    def check_private(self, sensitivity: object) -> None:
        """Assumption 1 of Hu et al. for a private run: bounded set, normalised rows, known curvature; and no
        ``refusal`` (features that depend on other parties' data)."""
        if self.refusal is not None:
            raise self._fail(f"a private run is refused: {self.refusal}.")
        if self.bound is None:
            raise self._fail("a private run needs a bounded feasible set (Assumption 1.1): give bound=b, which "
                             "adds ||x|| <= b.")
        norms = np.linalg.norm(self.data, axis=1)
        worst = float(np.max(norms))
        if worst > 1.0 + ROW_NORM_TOL:
            i = int(np.argmax(norms))
            raise self._fail(f"row {i} of the features has l2 norm {worst:.6g} > 1; the sensitivity analysis "
                             "needs every row normalised (Assumption 1.3). Rescale the rows, e.g. with "
                             "cvxdp_models.vertical.normalize_blocks.")
        if sensitivity == "paper" and self.c1 is None:
            raise self._fail("a private run with Lemma 1's sensitivity needs the regularizer's curvature bound "
                             "|R''| <= c1 (Assumption 1.2): pass curvature=c1.")


def check_labels(value: object, name: str, owner: str, loss: str) -> np.ndarray:
    """A 1-D finite float array; for the logistic loss every entry must be -1 or +1."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise fail(name, owner, "a 1-D array of numbers", type(value).__name__) from None
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)):
        raise fail(name, owner, "a non-empty 1-D array of finite numbers", f"an array of shape {arr.shape}")
    if loss == "logistic" and not np.all(np.isin(arr, (-1.0, 1.0))):
        bad = arr[~np.isin(arr, (-1.0, 1.0))][0]
        raise fail(name, owner, "labels in {-1, +1} for the logistic loss", f"an array holding {bad!r}")
    return arr


def _is_number(v: object) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float, np.integer, np.floating))


def check_parties(parties: object) -> list[Any]:
    """Non-empty list of vertical parties (or their declarations) with unique names and one sample count; runs
    every party's own check when it is the party itself."""
    if not isinstance(parties, (list, tuple)) or len(parties) == 0:
        raise fail("agents", "solve", "a non-empty list of cvxdp.VerticalParty (ADMMSharing)", parties)
    names: set[str] = set()
    n = None
    for party in parties:
        if isinstance(party, VerticalParty):
            party.check()
        elif not (isinstance(party, Declaration) and party.facts.get("kind") == "vertical"):
            raise fail("agents", "solve", "a list of cvxdp.VerticalParty for cvxdp.ADMMSharing",
                       type(party).__name__)
        if party.name in names:
            raise DeclarationError(f"Party name {party.name!r} is used twice; names must be unique.")
        names.add(party.name)
        if n is not None and party.n_samples != n:
            raise DeclarationError(f"Party {party.name!r} has {party.n_samples} samples but the first party has "
                                   f"{n}; vertically partitioned blocks must share their rows.")
        n = party.n_samples
    return list(parties)


# --------------------------------------------------------------------------- the round loop
__all__ = ["RELATION", "VerticalParty", "check_labels", "check_parties"]
