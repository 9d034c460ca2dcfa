"""What a ledger's numbers mean: notes that void or condition the claim, and warnings issued once.

A ledger's epsilon is a guarantee only for a sound calibration of the model at hand. Presets that reproduce
a paper's figures (``sensitivity="paper"``, the sharing paper's Lemma 1 and Corollary 1), a failed
assumption the user chose to run past, or a guarantee that rests on an idealisation (the exact minimiser of
penalty perturbation's primal problem) are recorded as notes in the ledger, appear in its summary
(``"guarantee": false`` when a note voids the claim) and in every report, and warn once per process.
"""

from __future__ import annotations

import warnings
from typing import Any

from ..errors import PrivacyWarning

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
