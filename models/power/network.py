"""Network data: pandapower's built-in cases and MATPOWER case files as per-unit, MATPOWER-style numpy arrays.

This is the only module of cvxdp that imports pandapower. :func:`load_case` converts a built-in case with
pandapower's own PYPOWER converter and returns a frozen :class:`PowerCase`; :func:`load_matpower` reads a
MATPOWER version-2 case file (``*.m``) with ``matpowercaseframes`` and keeps MATPOWER's order and bus
numbers; :func:`load_network` accepts either, or the name of a bundled PGLib-OPF case
(:data:`BUNDLED_CASES`, files under ``data/pglib/``: PGLib-OPF v23.07, CC BY 4.0).
:func:`run_ac_power_flow` fixes generator set-points and runs pandapower's Newton-Raphson AC power flow
(``runpp``) on pandapower's own net of a built-in case, or on the net pandapower's ``from_ppc`` converter
builds from a case file's MATPOWER data.

Data caveats handled here
-------------------------
* pandapower models every MATPOWER branch whose end buses have different base voltages as a transformer,
  and a transformer's magnetising susceptance is always inductive in pandapower. MATPOWER lines with
  capacitive charging that became transformers (case118: 4 branches, case300: 12) therefore come out with
  the wrong sign of ``b``. The original sign survives in the stored ``trafo.i0_percent`` (negative for
  those branches), which :func:`load_case` reads to restore MATPOWER's ``b`` exactly.
* pandapower's case300 (16 transformers) and case57 (all 17) put the tap of transformers whose MATPOWER
  "from" (tap) bus is the lower-voltage bus on the high-voltage side, which changes their admittance (r, x, b and the ratio are
  right, the side is not). Nothing in pandapower's data reveals this, so a small errata table
  (:data:`TAP_SIDE_ERRATA`, MATPOWER (from, to) bus numbers) restores MATPOWER's orientation; the AC
  check moves those taps to the low-voltage side of pandapower's net as well.

* A MATPOWER branch with ``rateA = 0`` has no thermal limit. pandapower's converter stores such a
  branch with the sentinel rating ``MAX_VAL = 99999`` (``max_i_ka`` of a line, ``sn_mva`` of a
  transformer), and the pegase cases were converted when ratings were in kVA, so their unlimited
  transformers carry ``sn_mva = 99.999``: read back as a 100 MVA limit (1 p.u.), which makes the OPF of
  case1354pegase (64 such transformers) and case2869pegase (255) infeasible. :func:`load_case` maps
  both sentinels back to ``rate_a = 0`` (no limit) and lists the branches in ``PowerCase.unlimited``.

With these corrections the admittance matrices of case14, case57, case118 and case300 equal PYPOWER's copies
(without the case57 errata, its SOC-OPF with exact balance is infeasible: reactive power cannot reach its
low-voltage area within 0.94-1.06 p.u.).
"""

from __future__ import annotations

import hashlib
import logging
import math
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from cvxdp.errors import ConfigError, OptionalDependencyError

__all__ = [
    "PowerCase",
    "available_cases",
    "bundled_cases",
    "BUNDLED_CASES",
    "PGLIB_DIR",
    "load_case",
    "load_matpower",
    "load_network",
    "ac_network",
    "resolve_network",
    "case_from_matpower",
    "make_ybus",
    "run_ac_power_flow",
    "AcFlow",
    "AC_ATTEMPTS",
    "TAP_SIDE_ERRATA",
    "UNLIMITED_RATING",
]

#: pandapower's rating of a MATPOWER branch without thermal limit (``rateA = 0``): ``MAX_VAL`` of its converter,
#: in kA for lines and in MVA (or, in cases converted when ratings were in kVA, MVA / 1000) for transformers.
UNLIMITED_RATING = 99999.0

#: Transformers of pandapower's built-in cases whose tap pandapower put on the wrong side, as MATPOWER
#: (from = tap bus, to) bus numbers.
TAP_SIDE_ERRATA: dict[str, tuple[tuple[int, int], ...]] = {
    # case57: every transformer (17; the two pairs of parallel ones listed twice)
    "case57": (
        (4, 18),
        (4, 18),
        (21, 20),
        (24, 25),
        (24, 25),
        (24, 26),
        (7, 29),
        (34, 32),
        (11, 41),
        (15, 45),
        (14, 46),
        (10, 51),
        (13, 49),
        (11, 43),
        (40, 56),
        (39, 57),
        (9, 55),
    ),
    "case300": (
        (3, 4),
        (63, 64),
        (189, 210),
        (193, 196),
        (201, 69),
        (202, 211),
        (204, 2040),
        (209, 198),
        (218, 219),
        (7062, 62),
        (7017, 17),
        (7039, 39),
        (7057, 57),
        (7044, 44),
        (7055, 55),
        (7071, 71),
    ),
}

#: Folder of the bundled PGLib-OPF v23.07 case files (https://github.com/power-grid-lib/pglib-opf, CC BY 4.0).
PGLIB_DIR = Path(__file__).resolve().parent / "data" / "pglib"

#: Names of the bundled PGLib-OPF cases (``[model] network = NAME``); the files are ``PGLIB_DIR / f"{NAME}.m"``.
BUNDLED_CASES = ("pglib_opf_case14_ieee", "pglib_opf_case118_ieee", "pglib_opf_case300_ieee")

#: How error messages name the entry a network comes from.
NETWORK_ENTRY = "The 'network' entry of [model]"

_EXAMPLES = ("case14", "case30", "case57", "case118", "case300", "case1354pegase", "case2869pegase")


def _pandapower() -> tuple[Any, Any]:
    try:
        import pandapower
        import pandapower.networks as pn
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise OptionalDependencyError(
            "The power template needs pandapower: pip install 'cvxdp[power]'."
        ) from exc
    logging.getLogger("pandapower").setLevel(logging.ERROR)
    return pandapower, pn


@dataclass(frozen=True, eq=False)
class PowerCase:
    """A power network in per unit (MATPOWER conventions, 0-based positions for bus references).

    Bus arrays have length ``n_bus``, generator arrays ``n_gen`` and branch arrays ``n_branch``. Powers are
    divided by ``base_mva``; angles are in radians; ``tap`` is the actual ratio (MATPOWER's 0 becomes 1);
    ``rate_a == 0`` means no thermal limit.

    Attributes
    ----------
    name : str
    base_mva : float
    bus_number : ndarray of int
        MATPOWER (1-based, possibly non-consecutive) bus numbers.
    bus_type : ndarray of int
        1 PQ, 2 PV, 3 reference, 4 isolated.
    pd, qd, gs, bs, vmin, vmax, base_kv : ndarray of float
        Loads and shunts in p.u. (shunts at 1 p.u. voltage), voltage limits in p.u., base voltage in kV.
    gen_bus : ndarray of int
        Position (into the bus arrays) of each generator's bus.
    pmin, pmax, qmin, qmax, vg : ndarray of float
        Generator limits (p.u.) and voltage set-point (p.u.).
    gen_status : ndarray of bool
    gencost : ndarray, shape (n_gen, 3)
        Polynomial cost ``c2 pg^2 + c1 pg + c0`` (currency/h) with ``pg`` in **per unit**.
    f_bus, t_bus : ndarray of int
        Positions of the branch end buses.
    r, x, b, rate_a, tap, shift, angmin, angmax : ndarray of float
    branch_status : ndarray of bool
    gen_element : tuple of (str, int)
        pandapower element ("ext_grid" or "gen") behind each generator of a built-in case (used by the AC
        check); empty for a case built from MATPOWER data.
    matpower : dict or None
        The MATPOWER data (``baseMVA``, ``bus``, ``gen``, ``branch``; MW, MVAr, degrees, bus numbers) of a case
        built by :func:`case_from_matpower`: the AC check converts it with pandapower's ``from_ppc``.
    """

    name: str
    base_mva: float
    bus_number: np.ndarray
    bus_type: np.ndarray
    pd: np.ndarray
    qd: np.ndarray
    gs: np.ndarray
    bs: np.ndarray
    vmin: np.ndarray
    vmax: np.ndarray
    base_kv: np.ndarray
    gen_bus: np.ndarray
    pmin: np.ndarray
    pmax: np.ndarray
    qmin: np.ndarray
    qmax: np.ndarray
    vg: np.ndarray
    gen_status: np.ndarray
    gencost: np.ndarray
    f_bus: np.ndarray
    t_bus: np.ndarray
    r: np.ndarray
    x: np.ndarray
    b: np.ndarray
    rate_a: np.ndarray
    tap: np.ndarray
    shift: np.ndarray
    angmin: np.ndarray
    angmax: np.ndarray
    branch_status: np.ndarray
    gen_element: tuple[tuple[str, int], ...] = field(repr=False)
    corrected_b: tuple[int, ...] = field(default=(), repr=False)
    corrected_tap: tuple[int, ...] = field(default=(), repr=False)
    unlimited: tuple[int, ...] = field(default=(), repr=False)
    matpower: dict[str, Any] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for value in [*vars(self).values(), *(self.matpower or {}).values()]:
            if isinstance(value, np.ndarray):
                value.setflags(write=False)

    @property
    def n_bus(self) -> int:
        return len(self.bus_number)

    @property
    def n_gen(self) -> int:
        return len(self.gen_bus)

    @property
    def n_branch(self) -> int:
        return len(self.f_bus)

    def bus_index(self, numbers: Any) -> np.ndarray:
        """Positions of the given MATPOWER bus numbers; :class:`ConfigError` for an unknown number."""
        lookup = {int(n): i for i, n in enumerate(self.bus_number)}
        out = []
        for n in np.atleast_1d(numbers):
            if int(n) not in lookup:
                raise ConfigError(
                    f"Bus {int(n)} is not a bus of {self.name} "
                    f"(buses {int(self.bus_number.min())}..{int(self.bus_number.max())})."
                )
            out.append(lookup[int(n)])
        return np.asarray(out, dtype=int)

    def with_loads(self, pd: np.ndarray, qd: np.ndarray) -> PowerCase:
        """A copy with other loads (p.u.), e.g. scaled ones."""
        values = dict(vars(self))
        values["pd"] = np.array(pd, dtype=float)
        values["qd"] = np.array(qd, dtype=float)
        return PowerCase(**values)

    def summary(self) -> dict[str, Any]:
        return {
            "case": self.name,
            "base_mva": self.base_mva,
            "buses": self.n_bus,
            "generators": self.n_gen,
            "branches": self.n_branch,
            "total_load_mw": float(self.pd.sum() * self.base_mva),
        }


def available_cases() -> list[str]:
    """Names of pandapower's built-in MATPOWER-style cases (``case*`` functions)."""
    _, pn = _pandapower()
    return sorted(n for n in dir(pn) if n.startswith("case") and callable(getattr(pn, n)))


def _net(name: str) -> Any:
    if not isinstance(name, str) or not name.startswith("case"):
        raise ConfigError(
            f"{NETWORK_ENTRY} must be the name of a pandapower built-in case such as "
            f"{', '.join(map(repr, _EXAMPLES))}, a bundled PGLib-OPF case ({', '.join(map(repr, BUNDLED_CASES))}) "
            f"or a path to a MATPOWER case file (*.m). Got {name!r} instead."
        )
    _, pn = _pandapower()
    factory = getattr(pn, name, None)
    if factory is None or not callable(factory):
        raise ConfigError(
            f"Unknown network {name!r}. Valid names include {', '.join(map(repr, _EXAMPLES))} "
            f"(all pandapower built-ins: {', '.join(available_cases())}), the bundled PGLib-OPF cases "
            f"{', '.join(map(repr, BUNDLED_CASES))}, or a path to a MATPOWER case file (*.m)."
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return factory()


def _to_ppc(net: Any) -> dict[str, Any]:
    from pandapower.converter.pypower import to_ppc

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return to_ppc(
            net,
            init="flat",
            trafo_model="pi",
            take_slack_vm_limits=False,
            mode="opf",
            check_connectivity=False,
            calculate_voltage_angles=True,
        )


def _polycost(gencost: np.ndarray, base: float, name: str) -> np.ndarray:
    """MATPOWER gencost rows (model 2) -> per-unit [c2, c1, c0]."""
    out = np.zeros((len(gencost), 3))
    for k, row in enumerate(gencost):
        if int(row[0]) != 2:
            raise ConfigError(
                f"{name}: generator {k} has a piecewise-linear cost; only polynomial costs are supported."
            )
        n = int(row[3])
        coeffs = np.asarray(row[4 : 4 + n], dtype=float)[::-1]  # c0, c1, c2, ...
        if n > 3 and np.any(coeffs[3:] != 0):
            raise ConfigError(
                f"{name}: generator {k} has a cost polynomial of degree {n - 1}; at most 2 is supported."
            )
        for d in range(min(n, 3)):
            out[k, 2 - d] = coeffs[d] * base**d
    return out


def load_case(name: str) -> PowerCase:
    """Load pandapower's built-in case ``name`` (e.g. ``"case14"``) as a per-unit :class:`PowerCase`.

    Cached: the returned case is immutable (read-only arrays), so repeated loads share one object.

    Generators are ordered by bus (stably); branches follow pandapower's order (lines, then transformers),
    and a branch without tap ratio or phase shift may be reversed with respect to MATPOWER (pandapower
    orients transformers from high to low voltage; physically the same branch). Transformer charging
    susceptances whose sign pandapower lost are restored and misplaced taps are moved back (see the
    module docstring), so the admittance matrix equals MATPOWER's.

    Raises
    ------
    ConfigError
        For an unknown case name (the message lists valid ones).
    """
    if not isinstance(name, str):
        _net(name)  # raises the ConfigError
    return _load_case(name)


def _unlimited_branches(net: Any) -> np.ndarray:
    """Branch indices (lines, then transformers) whose pandapower rating is the "no limit" sentinel."""
    line = np.isclose(net.line.max_i_ka.to_numpy(dtype=float), UNLIMITED_RATING, rtol=0.0, atol=1e-6)
    sn = net.trafo.sn_mva.to_numpy(dtype=float)
    trafo = np.isclose(sn, UNLIMITED_RATING, rtol=0.0, atol=1e-6) | np.isclose(
        sn, UNLIMITED_RATING / 1000.0, rtol=0.0, atol=1e-9
    )
    return np.flatnonzero(np.concatenate([line, trafo]))


@lru_cache(maxsize=16)
def _load_case(name: str) -> PowerCase:
    net = _net(name)
    ppc = _to_ppc(net)
    base = float(ppc["baseMVA"])
    bus = np.real(np.asarray(ppc["bus"], dtype=complex)).astype(float)
    branch = np.real(np.asarray(ppc["branch"], dtype=complex)).astype(float)
    gen = np.real(np.asarray(ppc["gen"], dtype=complex)).astype(float)
    n_bus = len(net.bus)
    if (
        len(bus) != n_bus
        or not np.array_equal(bus[:, 0], np.arange(n_bus))
        or not np.array_equal(net.bus.index.values, np.arange(n_bus))
    ):
        raise ConfigError(f"{name}: unexpected bus ordering in pandapower's conversion; cannot map buses.")
    numbers = (
        np.array([int(n) for n in net.bus.name.values])
        if net.bus.name.notna().all()
        else np.arange(1, n_bus + 1)
    )

    # --- branches: lines then transformers, in pandapower's order
    n_line, n_trafo = len(net.line), len(net.trafo)
    if len(branch) != n_line + n_trafo:
        raise ConfigError(
            f"{name}: only lines and two-winding transformers are supported "
            f"(found {len(branch) - n_line - n_trafo} other branch elements)."
        )
    b = branch[:, 4].copy()
    corrected = []
    if n_trafo:
        i0 = net.trafo.i0_percent.to_numpy(dtype=float)
        rows = n_line + np.flatnonzero((i0 < 0) & (b[n_line:] < 0))
        b[rows] = -b[rows]  # capacitive charging of a MATPOWER line that pandapower made a transformer
        corrected = [int(k) for k in rows]
    tap = branch[:, 8].copy()
    tap[tap == 0] = 1.0
    rate_a = branch[:, 5] / base
    unlimited = _unlimited_branches(net)
    rate_a[unlimited] = 0.0
    f_bus, t_bus = branch[:, 0].astype(int), branch[:, 1].astype(int)
    angmin, angmax = branch[:, 11].copy(), branch[:, 12].copy()
    flipped = []
    errata = TAP_SIDE_ERRATA.get(name, ())
    for f_num, t_num in errata:
        hits = [
            k
            for k in range(n_line, len(branch))
            if numbers[f_bus[k]] == t_num and numbers[t_bus[k]] == f_num and k not in flipped
        ]
        if len(hits) != errata.count((f_num, t_num)) - sum(
            1 for k in flipped if (numbers[f_bus[k]], numbers[t_bus[k]]) == (f_num, t_num)
        ):
            raise ConfigError(
                f"{name}: the tap-side erratum for transformer {f_num}-{t_num} no longer matches "
                "pandapower's data; update TAP_SIDE_ERRATA."
            )
        k = hits[0]
        f_bus[k], t_bus[k] = t_bus[k], f_bus[k]
        angmin[k], angmax[k] = -angmax[k], -angmin[k]
        flipped.append(k)

    # --- generators: by bus, stably; remember the pandapower element behind each row
    elements: list[tuple[str, int]] = []
    for kind in ("ext_grid", "gen"):
        table = net[kind]
        elements += [(kind, int(i)) for i in table.index[table.in_service.to_numpy(dtype=bool)]]
    elements += [
        (kind, int(i))
        for kind in ("ext_grid", "gen")
        for i in net[kind].index[~net[kind].in_service.to_numpy(dtype=bool)]
    ]
    if len(elements) != len(gen):
        raise ConfigError(f"{name}: found {len(gen)} generator rows but {len(elements)} generator elements.")
    gen_bus_raw = gen[:, 0].astype(int)
    expected = np.array([int(net[kind].bus.at[i]) for kind, i in elements])
    if not np.array_equal(expected, gen_bus_raw):
        raise ConfigError(f"{name}: cannot match pandapower's generator rows to its elements.")
    order = np.argsort(gen_bus_raw, kind="stable")
    gencost = np.asarray(ppc.get("gencost", np.zeros((len(gen), 7))), dtype=float)
    if len(gencost) < len(gen):
        gencost = np.vstack([gencost, np.tile([2, 0, 0, 3, 0, 0, 0], (len(gen) - len(gencost), 1))])

    def deg(col: np.ndarray) -> np.ndarray:
        return np.deg2rad(col)

    return PowerCase(
        name=name,
        base_mva=base,
        bus_number=numbers,
        **_bus_columns(bus, base),
        vmin=net.bus.min_vm_pu.to_numpy(dtype=float),
        vmax=net.bus.max_vm_pu.to_numpy(dtype=float),
        base_kv=bus[:, 9],
        gen_bus=gen_bus_raw[order],
        pmin=gen[order, 9] / base,
        pmax=gen[order, 8] / base,
        qmin=gen[order, 4] / base,
        qmax=gen[order, 3] / base,
        vg=gen[order, 5],
        gen_status=gen[order, 7] > 0,
        gencost=_polycost(gencost[order], base, name),
        f_bus=f_bus,
        t_bus=t_bus,
        r=branch[:, 2],
        x=branch[:, 3],
        b=b,
        rate_a=rate_a,
        tap=tap,
        shift=deg(branch[:, 9]),
        angmin=deg(angmin),
        angmax=deg(angmax),
        branch_status=branch[:, 10] > 0,
        gen_element=tuple(elements[k] for k in order),
        corrected_b=tuple(corrected),
        corrected_tap=tuple(flipped),
        unlimited=tuple(int(k) for k in unlimited),
    )


def _bus_columns(bus: np.ndarray, base: float) -> dict[str, np.ndarray]:
    """The bus type and the per-unit loads and shunts of a MATPOWER ``bus`` table (MW and MVAr over ``base``)."""
    return {"bus_type": bus[:, 1].astype(int), "pd": bus[:, 2] / base, "qd": bus[:, 3] / base,
            "gs": bus[:, 4] / base, "bs": bus[:, 5] / base}


def case_from_matpower(mpc: dict[str, Any], name: str = "custom") -> PowerCase:
    """Build a :class:`PowerCase` from a MATPOWER/PYPOWER case dict (MW, MVAr, degrees, bus numbers).

    Keeps MATPOWER's generator, branch and bus order and its bus numbers (which may be non-consecutive).
    ``rate_a = 0`` stays 0 (no thermal limit); out-of-service generators and branches keep their rows with
    ``gen_status`` / ``branch_status`` False; several generators may share a bus. The MATPOWER data is kept in
    ``PowerCase.matpower`` for :func:`run_ac_power_flow` (which converts it with pandapower's ``from_ppc``).
    """
    base = float(mpc["baseMVA"])
    bus = np.asarray(mpc["bus"], dtype=float)
    gen = np.asarray(mpc["gen"], dtype=float)
    branch = np.asarray(mpc["branch"], dtype=float)
    numbers = bus[:, 0].astype(int)
    pos = {int(n): i for i, n in enumerate(numbers)}
    gencost = np.asarray(mpc.get("gencost", np.tile([2, 0, 0, 3, 0, 0, 0], (len(gen), 1))), dtype=float)
    tap = branch[:, 8].copy()
    tap[tap == 0] = 1.0
    angmin = branch[:, 11] if branch.shape[1] > 12 else np.full(len(branch), -360.0)
    angmax = branch[:, 12] if branch.shape[1] > 12 else np.full(len(branch), 360.0)
    return PowerCase(
        name=name,
        base_mva=base,
        bus_number=numbers,
        **_bus_columns(bus, base),
        vmin=bus[:, 12].copy(),
        vmax=bus[:, 11].copy(),
        base_kv=bus[:, 9].copy(),
        gen_bus=np.array([pos[int(n)] for n in gen[:, 0]], dtype=int),
        pmin=gen[:, 9] / base,
        pmax=gen[:, 8] / base,
        qmin=gen[:, 4] / base,
        qmax=gen[:, 3] / base,
        vg=gen[:, 5].copy(),
        gen_status=gen[:, 7] > 0,
        gencost=_polycost(gencost[: len(gen)], base, name),
        f_bus=np.array([pos[int(n)] for n in branch[:, 0]], dtype=int),
        t_bus=np.array([pos[int(n)] for n in branch[:, 1]], dtype=int),
        r=branch[:, 2].copy(),
        x=branch[:, 3].copy(),
        b=branch[:, 4].copy(),
        rate_a=branch[:, 5] / base,
        tap=tap,
        shift=np.deg2rad(branch[:, 9]),
        angmin=np.deg2rad(angmin),
        angmax=np.deg2rad(angmax),
        branch_status=branch[:, 10] > 0,
        gen_element=(),
        matpower={"baseMVA": base, "bus": bus.copy(), "gen": gen.copy(), "branch": branch.copy()},
    )


def bundled_cases() -> list[str]:
    """Names of the bundled PGLib-OPF cases (:data:`BUNDLED_CASES`), usable as ``[model] network``."""
    return list(BUNDLED_CASES)


def _is_path(network: str) -> bool:
    return network.lower().endswith(".m") or "/" in network or "\\" in network


def resolve_network(network: str, base_dir: str | Path | None = None) -> Path | None:
    """The MATPOWER file behind ``network``, or None for a pandapower built-in name.

    A bundled PGLib-OPF name gives its shipped file; a path (ending in ``.m`` or containing a separator)
    resolves against ``base_dir`` (default: the current directory) unless absolute, and must be a file.

    Raises
    ------
    ConfigError
        For an unknown ``pglib_*`` name (listing the bundled ones), a missing file or a directory.
    """
    if not isinstance(network, str) or not network:
        raise ConfigError(f"{NETWORK_ENTRY} must be a non-empty str such as 'case14'. Got {network!r} instead.")
    if network in BUNDLED_CASES:
        return PGLIB_DIR / f"{network}.m"
    if not _is_path(network):
        if network.lower().startswith("pglib"):
            raise ConfigError(
                f"{NETWORK_ENTRY} must be a bundled PGLib-OPF case ({', '.join(map(repr, BUNDLED_CASES))}) or a "
                f"path to a MATPOWER case file (*.m). Got {network!r} instead."
            )
        return None
    path = Path(network)  # no ~ expansion: the fingerprint (case_context) hashes the path as written
    if not path.is_absolute():
        path = Path(base_dir if base_dir is not None else Path.cwd()) / path
    path = path.resolve()
    if path.is_dir():
        raise ConfigError(f"{NETWORK_ENTRY} must name a MATPOWER case file (*.m). Got {network!r} instead, "
                          f"which is a directory ({path}).")
    if not path.is_file():
        raise ConfigError(f"{NETWORK_ENTRY} must name an existing MATPOWER case file (*.m). Got {network!r} "
                          f"instead: {path} does not exist.")
    return path


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes (hex)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load_matpower(path: str | Path, name: str | None = None) -> PowerCase:
    """Read a MATPOWER version-2 case file (``*.m``) with ``matpowercaseframes`` into a :class:`PowerCase`.

    Built by :func:`case_from_matpower` (MATPOWER's order and bus numbers kept); ``name`` defaults to the file's
    stem. Cached by content: the same bytes give the same immutable case.

    Raises
    ------
    ConfigError
        Naming the ``[model]`` ``network`` entry and the file: not a file, not a MATPOWER case (parse
        failure, missing tables), or costs the model does not support (piecewise-linear, degree > 2).
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{NETWORK_ENTRY} must name an existing MATPOWER case file (*.m). Got {str(path)!r} "
                          "instead, which is not a file.")
    try:
        digest = file_sha256(path)
    except OSError as exc:
        raise ConfigError(f"{NETWORK_ENTRY}: cannot read the MATPOWER case file {str(path)!r} "
                          f"({type(exc).__name__}: {exc.strerror or exc}).") from None
    return _load_matpower(str(path), digest, name or path.stem)


def _matpower_tables(path: str) -> dict[str, Any]:
    """``baseMVA``, ``bus``, ``gen``, ``branch``, ``gencost`` of a MATPOWER file as floats (ConfigError if not one)."""
    try:
        from matpowercaseframes import CaseFrames
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise OptionalDependencyError(
            "Reading MATPOWER case files needs matpowercaseframes: pip install 'cvxdp[power]'.") from exc
    what = f"{NETWORK_ENTRY} must name a MATPOWER version-2 case file (*.m). Got {path!r} instead"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            frames = CaseFrames(path)
    except Exception as exc:  # the parser raises whatever its regular expressions or pandas meet
        raise ConfigError(f"{what}: it could not be parsed ({type(exc).__name__}: {exc}).") from None
    missing = [k for k in ("baseMVA", "bus", "gen", "branch") if not hasattr(frames, k)]
    if missing:
        raise ConfigError(f"{what}: it defines no mpc.{', mpc.'.join(missing)}.")
    version = str(getattr(frames, "version", "2")).strip("'\" ")
    if version != "2":
        raise ConfigError(f"{what}: it is a version-{version} case (mpc.version = '2' is supported).")
    try:
        out: dict[str, Any] = {"baseMVA": float(frames.baseMVA)}
        for key, cols in (("bus", 13), ("gen", 10), ("branch", 11), ("gencost", 4)):
            if hasattr(frames, key):
                table = np.asarray(frames.__getattribute__(key), dtype=float)
                if table.ndim != 2 or table.shape[1] < cols or not np.all(np.isfinite(table[:, :cols])):
                    raise ValueError(f"mpc.{key} must have at least {cols} finite columns, got shape {table.shape}")
                out[key] = table
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{what}: {exc}.") from None
    return out


@lru_cache(maxsize=8)
def _load_matpower(path: str, digest: str, name: str) -> PowerCase:
    mpc = _matpower_tables(path)
    try:
        return case_from_matpower(mpc, name=name)
    except ConfigError as exc:
        raise ConfigError(f"{NETWORK_ENTRY} ({path!r}): {exc}") from None
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(f"{NETWORK_ENTRY} ({path!r}): inconsistent MATPOWER data "
                          f"({type(exc).__name__}: {exc}), e.g. a generator or branch at an unknown bus.") from None


def load_network(network: str, base_dir: str | Path | None = None) -> PowerCase:
    """The :class:`PowerCase` of a ``[model]`` ``network`` entry: a pandapower built-in name (:func:`load_case`),
    a bundled PGLib-OPF name (:data:`BUNDLED_CASES`) or a MATPOWER case file path (relative to ``base_dir``,
    default the current directory; :func:`load_matpower`)."""
    path = resolve_network(network, base_dir)
    return load_case(network) if path is None else load_matpower(path)


def make_ybus(case: PowerCase) -> sp.csr_matrix:
    """Bus admittance matrix (p.u.) of the in-service branches and shunts (MATPOWER's ``makeYbus``)."""
    on = case.branch_status
    ys = 1.0 / (case.r[on] + 1j * case.x[on])
    tau = case.tap[on] * np.exp(1j * case.shift[on])
    bc = case.b[on]
    ytt = ys + 0.5j * bc
    yff = ytt / (tau * np.conj(tau))
    yft = -ys / np.conj(tau)
    ytf = -ys / tau
    f, t = case.f_bus[on], case.t_bus[on]
    n = case.n_bus
    rows = np.concatenate([f, f, t, t, np.arange(n)])
    cols = np.concatenate([f, t, f, t, np.arange(n)])
    vals = np.concatenate([yff, yft, ytf, ytt, case.gs + 1j * case.bs])
    return sp.csr_matrix((vals, (rows, cols)), shape=(n, n))


#: Initialisations and iteration caps :func:`run_ac_power_flow` tries in turn until one converges.
AC_ATTEMPTS: tuple[tuple[str, int], ...] = (("dc", 30), ("flat", 100))


@dataclass(frozen=True)
class AcFlow:
    """Result of :func:`run_ac_power_flow` (p.u., radians; generator order of the case)."""

    converged: bool
    vm: np.ndarray
    va: np.ndarray
    pg: np.ndarray
    qg: np.ndarray
    branch_s_from: np.ndarray
    branch_s_to: np.ndarray
    message: str = ""


def _corrected_net(case: PowerCase) -> Any:
    """pandapower's net of the case with its data errors corrected.

    Restored charging susceptances are added back as shunts; erroneous tap sides move to the low-voltage
    side (a tap ``tau`` on the lv side with unchanged ``vk_percent`` equals MATPOWER's branch lv -> hv).
    """
    pandapower, _ = _pandapower()
    net = _net(case.name)
    n_line = len(net.line)
    for k in case.corrected_tap:
        net.trafo.at[k - n_line, "tap_side"] = "lv"
    for k in case.corrected_b:
        # the pi-model trafo carries -|b|/2 at each end; MATPOWER's line carries +|b|/2: add |b| per end
        for end in (case.f_bus[k], case.t_bus[k]):
            pandapower.create_shunt(
                net,
                bus=int(end),
                q_mvar=-abs(case.b[k]) * case.base_mva,
                p_mw=0.0,
                name=f"cvxdp charging fix trafo {k - n_line}",
            )
    return net


@dataclass
class _AcNet:
    """A pandapower net for the AC check and how the case's generators, buses and branches map onto it."""

    net: Any
    gens: list[tuple[str, int]]        # (element table, index) per generator of the case
    bus: np.ndarray                    # pandapower bus index per case bus position
    branches: list[tuple[str, int]]    # (element table, index) per branch of the case


#: The two ends of each pandapower branch table: (bus column, p column, q column), "from" side first.
_BRANCH_ENDS = {
    "line": (("from_bus", "p_from_mw", "q_from_mvar"), ("to_bus", "p_to_mw", "q_to_mvar")),
    "impedance": (("from_bus", "p_from_mw", "q_from_mvar"), ("to_bus", "p_to_mw", "q_to_mvar")),
    "trafo": (("hv_bus", "p_hv_mw", "q_hv_mvar"), ("lv_bus", "p_lv_mw", "q_lv_mvar")),
}


def _builtin_ac_net(case: PowerCase) -> _AcNet:
    net = _corrected_net(case)
    branches = [("line", int(i)) for i in net.line.index] + [("trafo", int(i)) for i in net.trafo.index]
    return _AcNet(net, list(case.gen_element), np.arange(case.n_bus), branches)


def _matpower_ac_net(case: PowerCase) -> _AcNet:
    """pandapower's ``from_ppc`` net of the case's MATPOWER data, corrected to MATPOWER's admittances.

    ``from_ppc`` turns a branch with a tap ratio or phase shift into a transformer whose magnetising
    susceptance is always inductive and puts every tap on the high-voltage side. So the charging ``b`` of
    such a branch is taken out of the branch and added as bus shunts exactly as MATPOWER places it
    (``b / 2 / tap^2`` at the from bus, ``b / 2`` at the to bus), and the tap is moved back to MATPOWER's from
    bus (``tap_side = "lv"``) where that bus is the lower-voltage one. The admittance matrix then equals
    :func:`make_ybus` (checked on the bundled PGLib cases).
    """
    from pandapower.converter.pypower.from_ppc import from_ppc

    mpc = case.matpower
    assert mpc is not None
    bus, gen, branch = (np.array(mpc[k], dtype=float) for k in ("bus", "gen", "branch"))
    tap = branch[:, 8]
    is_trafo = ((tap != 0) & (tap != 1)) | (branch[:, 9] != 0)
    ratio = np.where(tap == 0, 1.0, tap)
    for k in np.flatnonzero(is_trafo & (branch[:, 4] != 0)):
        half = branch[k, 4] / 2.0 * case.base_mva
        bus[case.f_bus[k], 5] += half / ratio[k] ** 2
        bus[case.t_bus[k], 5] += half
        branch[k, 4] = 0.0
    ppc = {"version": "2", "baseMVA": case.base_mva, "bus": bus, "gen": gen, "branch": branch}
    logging.getLogger("pandapower.converter.pypower.from_ppc").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = from_ppc(ppc, f_hz=50, check_costs=False)
    lookups = net._from_ppc_lookups
    gens = [(str(t), int(e)) for t, e in zip(lookups["gen"].element_type, lookups["gen"].element)]
    branches = [(str(t), int(e)) for t, e in zip(lookups["branch"].element_type, lookups["branch"].element)]
    # from_ppc puts the tap on the high-voltage bus; where MATPOWER's from (tap) bus is the lower-voltage one,
    # move it there: a tap tau on the lv side with unchanged vk_percent is MATPOWER's branch (as _corrected_net)
    kv = bus[:, 9]
    for k in np.flatnonzero(is_trafo & (kv[case.t_bus] > kv[case.f_bus])):
        net.trafo.at[branches[k][1], "tap_side"] = "lv"
    return _AcNet(net, gens, net.bus.index.to_numpy()[np.arange(case.n_bus)], branches)


def ac_network(case: PowerCase) -> _AcNet:
    """The pandapower net the AC check of ``case`` runs on (see :func:`run_ac_power_flow`).

    Raises
    ------
    ConfigError
        For a case with neither pandapower elements nor MATPOWER data.
    """
    if case.gen_element:
        return _builtin_ac_net(case)
    if case.matpower is None:
        raise ConfigError(f"The AC check of {case.name!r} needs a case from load_case() or load_network() (or "
                          "case_from_matpower()): it has neither pandapower elements nor MATPOWER data.")
    return _matpower_ac_net(case)


def _split_q(case: PowerCase, gens: list[tuple[str, int]], q: np.ndarray) -> np.ndarray:
    """Reactive output of buses with a static generator ("sgen", a second generator at a bus in ``from_ppc``)
    shared among the bus's in-service generators in proportion to their reactive ranges (MATPOWER's rule)."""
    q = q.copy()
    on = np.asarray(case.gen_status, dtype=bool)
    for b in {int(case.gen_bus[k]) for k, (kind, _) in enumerate(gens) if kind == "sgen"}:
        idx = np.flatnonzero((case.gen_bus == b) & on)
        total, span = float(q[idx].sum()), case.qmax[idx] - case.qmin[idx]
        if np.all(np.isfinite(span)) and span.sum() > 0:
            q[idx] = case.qmin[idx] + (total - case.qmin[idx].sum()) * span / span.sum()
        else:
            q[idx] = total / len(idx)
    return q


def run_ac_power_flow(case: PowerCase, pg: np.ndarray, vm: np.ndarray | None = None) -> AcFlow:
    """Fix generator set-points and run pandapower's AC power flow (``runpp``, pi transformer model).

    Parameters
    ----------
    case : PowerCase
        As returned by :func:`load_case` or :func:`load_network` (loads are taken from ``case.pd``/``case.qd``).
        A built-in case runs on pandapower's own net (corrected, see the module docstring); a case from
        MATPOWER data on the net of pandapower's ``from_ppc`` (see :func:`ac_network`), where a second generator
        at a bus is a static generator with fixed ``pg`` and the bus's reactive output is shared as MATPOWER does.
    pg : ndarray (n_gen,)
        Active generation (p.u.); the reference generator's value is what the power flow balances.
    vm : ndarray (n_bus,), optional
        Voltage magnitudes (p.u.) whose values at generator buses become the voltage set-points;
        defaults to the case's set-points ``vg``.

    Each start of :data:`AC_ATTEMPTS` is tried until one converges; if none does (or the net cannot be
    built from the case's data), the returned flow has ``converged=False``, NaN arrays and a ``message``
    naming every attempt and pandapower's error.
    """
    pandapower, _ = _pandapower()
    pg = np.asarray(pg, dtype=float)
    try:
        ac = ac_network(case)
    except ConfigError:
        raise
    except Exception as exc:  # pandapower's converter on data it does not support
        return _failed_flow(case, f"pandapower could not build a net from {case.name!r}'s MATPOWER data "
                                  f"({type(exc).__name__}: {exc})")
    net = ac.net
    # loads: replace by one load per bus carrying the case's (possibly scaled) demand
    net.load.drop(net.load.index, inplace=True)
    if "sgen" in net and len(net.sgen) and not any(kind == "sgen" for kind, _ in ac.gens):
        net.sgen.drop(net.sgen.index, inplace=True)
    elif "sgen" in net and len(net.sgen):  # keep the generators, drop negative loads (from_ppc makes them sgens)
        gen_sgens = {idx for kind, idx in ac.gens if kind == "sgen"}
        net.sgen.drop([i for i in net.sgen.index if int(i) not in gen_sgens], inplace=True)
    for i in range(case.n_bus):
        if case.pd[i] != 0 or case.qd[i] != 0:
            pandapower.create_load(
                net, bus=int(ac.bus[i]), p_mw=case.pd[i] * case.base_mva, q_mvar=case.qd[i] * case.base_mva
            )
    for k, (kind, idx) in enumerate(ac.gens):
        if kind == "sgen":
            net.sgen.at[idx, "p_mw"] = pg[k] * case.base_mva
            net.sgen.at[idx, "q_mvar"] = 0.0
            continue
        vset = float(vm[case.gen_bus[k]]) if vm is not None else float(case.vg[k])
        net[kind].at[idx, "vm_pu"] = vset
        if kind == "gen":
            net.gen.at[idx, "p_mw"] = pg[k] * case.base_mva
    converged, failures = False, []
    for init, iterations in AC_ATTEMPTS:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pandapower.runpp(
                    net,
                    trafo_model="pi",
                    calculate_voltage_angles=True,
                    init=init,
                    enforce_q_lims=False,
                    numba=False,
                    max_iteration=iterations,
                )
        except Exception as exc:  # pandapower raises LoadflowNotConverged (a subclass of ppException)
            failures.append(f"{init} start, {iterations} iterations: {type(exc).__name__}: {exc}".rstrip(": "))
            continue
        converged = True
        break
    if not converged:
        return _failed_flow(
            case, "pandapower's Newton-Raphson power flow did not converge (" + "; ".join(failures) + ")"
        )
    p_out, q_out = np.zeros(case.n_gen), np.zeros(case.n_gen)
    for k, (kind, idx) in enumerate(ac.gens):
        res = net[f"res_{kind}"]
        p_out[k] = res.at[idx, "p_mw"] / case.base_mva
        q_out[k] = res.at[idx, "q_mvar"] / case.base_mva
    s_from, s_to = np.zeros(case.n_branch), np.zeros(case.n_branch)
    for k, (kind, idx) in enumerate(ac.branches):
        (bus_a, pa, qa), (_, pb, qb) = _BRANCH_ENDS[kind]
        res = net[f"res_{kind}"]
        sa = math.hypot(res.at[idx, pa], res.at[idx, qa]) / case.base_mva
        sb = math.hypot(res.at[idx, pb], res.at[idx, qb]) / case.base_mva
        # the element's first end is the case's from bus unless pandapower oriented it the other way
        if int(net[kind].at[idx, bus_a]) == int(ac.bus[case.f_bus[k]]):
            s_from[k], s_to[k] = sa, sb
        else:
            s_from[k], s_to[k] = sb, sa
    return AcFlow(
        True,
        net.res_bus.vm_pu.to_numpy(dtype=float),
        np.deg2rad(net.res_bus.va_degree.to_numpy(dtype=float)),
        p_out,
        _split_q(case, ac.gens, q_out),
        s_from,
        s_to,
    )


def _failed_flow(case: PowerCase, message: str) -> AcFlow:
    nan_b = np.full(case.n_bus, np.nan)
    return AcFlow(
        False,
        nan_b,
        nan_b,
        np.full(case.n_gen, np.nan),
        np.full(case.n_gen, np.nan),
        np.full(case.n_branch, np.nan),
        np.full(case.n_branch, np.nan),
        message=message,
    )
