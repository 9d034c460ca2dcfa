"""Exact consensus ADMM ("admm"): the non-private baseline with an exact local prox solve (SPEC §2)."""

from __future__ import annotations

from ...params import check_float, fail
from ...schedules import AdaptiveRho, BlockBalance
from .updates import Algorithm


class ADMM(Algorithm):
    """Exact ADMM: each agent solves ``argmin_{u in W} f(u) - <lambda, E u> + rho/2 ||B w - E u||^2``.

    Parameters
    ----------
    rho : "auto", float or schedule, default "auto"
        Penalty. ``"auto"``: :class:`~cvxdp.schedules.AdaptiveRho` ``(target=0.3, mu=10)`` (residual balancing
        on released residuals, aiming at a primal residual about 3x below the dual one and acting only when
        they are more than 10x off that, frozen after its ``adapt_rounds``). When agents declare public
        per-block weights (``Agent(rho_scale=...)``), coordinate k is penalized with ``rho * weight_k`` and
        each block's weight is balanced on its own, within a decade of its declared value
        (:class:`~cvxdp.schedules.BlockBalance`); an explicit rho
        is used as given on every coordinate (the weights are then not used). A change of rho sets the local solver up again (same compiled data).
    rounds : int
        Maximum number of rounds.
    relaxation : "auto" or float in (0, 2), default "auto"
        Over-relaxation (Boyd et al. §3.4.3): each agent's target is
        ``relaxation * B_p w + (1 - relaxation) * E_p z_p`` (its previous released copy) in place of
        ``B_p w``, in both its prox step and the dual update. 1.0 is plain ADMM; values in [1.5, 1.8] usually
        need fewer rounds. ``"auto"``: 1.3 for the first 15 rounds, then 1.6 (:meth:`relaxation_at`) -- a
        strong over-relaxation amplifies the cold start's swings (PGLib case14: the cost swings +-20 % in the
        first rounds), a milder one for the warm-up damps them. A float is used in every round. It is a fixed
        schedule of the round number, so it costs no privacy.
    tol_primal, tol_dual : float, optional
        Stop when both residuals fall below these.
    tol_mismatch : float, optional
        Stop when the copies' mismatch (the history's ``mismatch`` column: how far the agents' released copies
        of each shared value disagree) falls below it. PowerModelsADA's ADMM stops when half of it falls below
        its ``tol`` (``tol_mismatch = 2 * tol`` is the same rule). It reads released values only.
    polish : bool, default True
        Consensus polishing (:meth:`cvxdp.model.local_solver.ProxSolver.polish`). In every round each agent also
        solves its own problem with its shared block fixed to the mean of the copies released in the round
        before (public: the server sends it with the round's message) and releases one bit: whether that was
        feasible. When every agent's was, the agents' polished local solutions together are a feasible point
        of the whole problem whose copies agree exactly, so its cost is an upper bound on the optimum; the
        last such point is ``result.polished`` and the history's ``polished`` column marks its rounds (its
        cost, computed on private data, is the evaluation column ``polished_objective``). It costs one more
        local solve per agent in each round that polishes and changes nothing else in the run. After
        ``polish_patience`` rounds in a row whose polish was not feasible for every agent, the rounds between
        attempts double up to ``polish_max_gap`` (:meth:`polish_gap`; it reads the released bits only, and
        a complete polish resets it); those rounds' ``polished`` is NaN. ``False``: plain ADMM.
    """

    name = "admm"
    private_ok = False
    #: rho="auto": a primal-leaning balance, adapted only on a 10x imbalance (measured with over-relaxation and
    #: the power template's per-block weights: benchmarks/bench_power.py --acceptance)
    auto_rho = AdaptiveRho(target=0.3, mu=10.0)
    #: rho="auto" with per-block weights declared by the agents (Agent(rho_scale=...)): each block balanced apart
    auto_blocks = BlockBalance(target=0.3, mu=3.0, adapt_rounds=60)
    #: relaxation="auto": ``warmup_relaxation`` in rounds 1..``warmup_rounds`` (the block balance's warm-up, in
    #: which it only lowers weights), then ``steady_relaxation`` (benchmarks/bench_power.py --acceptance,
    #: bench_large_cases.py admm)
    warmup_relaxation, warmup_rounds, steady_relaxation = 1.3, auto_blocks.warmup, 1.6
    #: polish=True: attempts in every round until this many in a row failed, then at most this many rounds apart
    #: (case1354pegase / case2869pegase never polish: benchmarks/bench_polish.py --large)
    polish_patience, polish_max_gap = 8, 8

    def __init__(self, rho: float | str = "auto", rounds: int = 100, *, relaxation: float | str = "auto",
                 tol_primal: float | None = None, tol_dual: float | None = None,
                 tol_mismatch: float | None = None, polish: bool = True) -> None:
        super().__init__(rho=rho, rounds=rounds, tol_primal=tol_primal, tol_dual=tol_dual, tol_mismatch=tol_mismatch)
        self.relaxation = relaxation
        self.polish = polish

    def validate(self) -> None:
        super().validate()
        if isinstance(self.relaxation, str) and self.relaxation != "auto":
            raise fail("relaxation", type(self).__name__, '"auto" or a float in (0, 2)', self.relaxation)
        if self.relaxation != "auto":
            check_float(self.relaxation, "relaxation", type(self).__name__, 0.0, 2.0)
        if not isinstance(self.polish, bool):
            raise fail("polish", type(self).__name__, "a bool", self.polish)

    def relaxation_at(self, t: int) -> float:
        """The over-relaxation of round ``t`` (1-based)."""
        if self.relaxation != "auto":
            return float(self.relaxation)
        return self.warmup_relaxation if t <= self.warmup_rounds else self.steady_relaxation

    def polish_gap(self, failures: int) -> int:
        """Rounds from a polishing round to the next one, after ``failures`` failed attempts in a row: 1 while
        ``failures < polish_patience``, then doubling with every further failure up to ``polish_max_gap``."""
        if failures < self.polish_patience:
            return 1
        return int(min(2 ** (failures - self.polish_patience + 1), self.polish_max_gap))

    def describe(self) -> dict:
        return {**super().describe(), "relaxation": self.relaxation, "polish": self.polish}
