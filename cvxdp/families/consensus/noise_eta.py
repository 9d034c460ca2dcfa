"""eta that grows while an agent's released copies only move with the noise (private runs, ``eta="auto"``).

In a private LinearizedADMM run each local update moves the iterate by the noise over the proximal weight,
``xi / (eta + rho)`` (ObjPert), or by output noise whose scale is the sensitivity over ``eta`` (OutPert). With
``eta = L_p`` from the curvature bound alone, the noise dominates: on case14's balance objective at a per-step
epsilon of 1, the run ends at 10.5 (ObjG) and 20.4 (OutG) where ``eta = 32 L_p`` reaches 0.44 and 0.39
(``benchmarks/bench_eta.py --part noise``). The right eta depends on the noise, the horizon and how far the
start is from the optimum; the last is unknown, so a fixed rule cannot pick it.

:class:`NoiseEta` finds it from the released copies. Once an agent's successive moves are not aligned (the
sum of inner products of successive increments, Pflug's 1983 statistic that Chee & Toulis, AISTATS 2018, use to
cut SGD's step, is below :data:`ALIGNED` times their energy: it is negative when an iterate hovers around a
point and near zero when it wanders like a random walk, positive along a drift), their energy is no more than
the noise's, and the drift seen over the window, carried over the remaining R rounds, covers less than the noise
adds up to over them (``sqrt(R)`` draws, as a random walk: the balance between deterministic travel and noise
that sets the step of noisy gradient methods over a fixed horizon, e.g. Bassily, Smith & Thakurta, FOCS 2014),
that agent's eta is multiplied by :data:`GROWTH`. It never decreases and stays below ``CAP * eta_p``, so the
schedule is non-decreasing and bounded (SPEC §2).

Privacy: it reads only the released copies ``E_p z_p`` and the public noise scale of the round's plan (a
function of epsilon, delta, the declared sensitivity and eta), so it is post-processing and costs nothing;
the ledger charges every round at the eta that round used.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

#: eta is multiplied by this when the test fires (the learning-rate halving of Chee & Toulis)
GROWTH = 2.0
#: rounds of moves the statistic needs after each change
BURN_IN = 5
#: eta_p never exceeds CAP times its starting value
CAP = 1e4
#: successive moves count as aligned (a drift) when their summed inner products exceed this share of their energy
ALIGNED = 0.2


def release_noise_std(scale: float, noise: str, placement: str, weight: float) -> float:
    """Standard deviation, per coordinate, of the noise one local update leaves in a released shared copy.

    ``scale`` is the round's noise plan scale (Gaussian sigma, Laplace b); ``weight`` the projection weight of a
    shared coordinate, ``eta + rho``. Objective perturbation moves the iterate by ``xi / weight``; output
    perturbation adds its noise to the iterate directly. It is an upper estimate: the projection onto ``W_p`` is
    non-expansive, and the average over J > 1 local updates carries less.
    """
    std = scale * (math.sqrt(2.0) if noise == "laplace" else 1.0)
    return std if placement == "output" else std / weight


def noise_dominated(corr: float, energy: float, count: int, net: float, noise_var: float,
                    remaining: int) -> bool:
    """Whether an agent's last ``count`` moves are the noise's doing (the three conditions of the module docstring).

    Parameters
    ----------
    corr : float
        Sum of inner products of successive moves of the released copy (compared with ``ALIGNED * energy``).
    energy : float
        Sum of the squared norms of those moves.
    count : int
        Number of moves summed.
    net : float
        Norm of the copy's displacement over the window (``count + 1`` moves).
    noise_var : float
        Expected squared norm of one noise draw in the copy (``n_shared * std**2``).
    remaining : int
        Rounds left in the run.
    """
    if count < BURN_IN or corr >= ALIGNED * energy or noise_var <= 0.0:
        return False
    if energy / count > 2.0 * noise_var:  # a move is the difference of two draws: 2 x the noise energy
        return False
    # both ends of the window carry a noise draw: 2 x noise_var of the net displacement is the noise's
    drift = math.sqrt(max(net * net - 2.0 * noise_var, 0.0)) / (count + 1)
    # what the drift would still cover vs what the noise adds up to over the remaining rounds (a random walk)
    return drift * remaining < math.sqrt(noise_var * max(remaining, 1))


@dataclass
class NoiseEta:
    """Per-agent multipliers of the automatic eta and the statistics behind them (checkpointed with the
    consensus state)."""

    scale: np.ndarray
    corr: np.ndarray
    energy: np.ndarray
    count: np.ndarray
    moves: list = field(default_factory=list)
    anchors: list = field(default_factory=list)

    @classmethod
    def start(cls, n_agents: int) -> NoiseEta:
        zeros = np.zeros(n_agents)
        return cls(scale=np.ones(n_agents), corr=zeros.copy(), energy=zeros.copy(),
                   count=np.zeros(n_agents, dtype=int), moves=[None] * n_agents, anchors=[None] * n_agents)

    def observe(self, before: Sequence[np.ndarray], after: Sequence[np.ndarray], noise_std: Sequence[float], *,
                remaining: int, growth: float = GROWTH) -> None:
        """Update the statistics with one round's released copies (``before`` -> ``after``) and grow the eta
        of every agent whose moves are noise-dominated."""
        for p, (old, new, std) in enumerate(zip(before, after, noise_std)):
            new = np.asarray(new, dtype=float)
            move = new - np.asarray(old, dtype=float)
            if self.anchors[p] is None:
                self.anchors[p] = np.array(old, dtype=float)
            if self.moves[p] is not None:
                self.corr[p] += float(move @ self.moves[p])
                self.energy[p] += float(move @ move)
                self.count[p] += 1
                net = float(np.linalg.norm(new - self.anchors[p]))
                if self.scale[p] * growth <= CAP and noise_dominated(
                        self.corr[p], self.energy[p], int(self.count[p]), net, move.size * std * std, remaining):
                    self.scale[p] *= growth
                    self.corr[p], self.energy[p], self.count[p] = 0.0, 0.0, 0
                    self.anchors[p] = new.copy()
            self.moves[p] = move


__all__ = ["ALIGNED", "BURN_IN", "CAP", "GROWTH", "NoiseEta", "noise_dominated", "release_noise_std"]
