"""Mutation testing of the privacy-critical modules with Cosmic Ray (issue 52): which one-line bugs do the tests miss?

Not CI (a full run takes hours). For each row of :data:`MODULES` (a module and the tests that cover it), in a scratch
copy of the repository at HEAD:

1. ``cosmic-ray init`` lists every mutant of the module (Cosmic Ray's core operators: arithmetic, comparison and
   boolean operators swapped, numbers moved by one, ``not`` added, decorators removed, loops run zero times, ...);
2. filters mark as skipped: a mutation inside a type annotation (every module has ``from __future__ import
   annotations``, so annotations are never evaluated: equivalent by construction), the operator swaps outside
   :data:`KEPT_SWAPS` (one swap per operator, as mutmut makes them, instead of every operator for every other), and,
   for a row that names ``definitions``, everything outside them (``cvxdp/model/declaration.py``: only the sampling);
3. the row's tests run once unmutated (they must pass), then ``cosmic-ray exec`` applies each mutant on disk and runs
   the test command: a tiny client of a test server started here, which has imported the dependencies once
   (numpy, SciPy, CVXPY, dp-accounting, pytest, ...; never cvxdp) and forks one child per mutant that imports the
   mutated cvxdp afresh and runs, with ``pytest -x``, only the row's tests that ran a line of the mutated statement
   (measured once on the unmutated code with ``sys.settrace``, fastest first; a mutant at module or class level or in
   a function's header (its signature and defaults), run at import, runs them all). A mutant that no test reaches
   survives without a run. A child still running after 30 s plus 3 times the selected tests' unmutated time (times
   the load per core, when above 1) is stopped and run once more with four times as long; stopped again, the mutant
   counts as killed (a loop that no longer ends; when survivors run again, a timeout counts as surviving: on a
   loaded machine it may be the load);
4. the survivors are written with their diffs, and each row's score is ``killed / (mutants - skipped - equivalent)``,
   the equivalent ones being the survivors listed in :data:`EQUIVALENT` with the reason each cannot change what the
   module computes (docs/mutation-testing.md shows the last run's scores and every survivor's reason).

    pip install -e ".[mutation]"                              # Cosmic Ray
    python benchmarks/mutation_testing.py                      # every row, one after the other
    python benchmarks/mutation_testing.py privacy/noise        # one row (the names of MODULES)
    python benchmarks/mutation_testing.py --list               # the rows, their files and tests
    python benchmarks/mutation_testing.py --survivors privacy/noise   # the last run's survivors, against new tests
    python benchmarks/mutation_testing.py --resume privacy/accounting # continue a session that was stopped
    python benchmarks/mutation_testing.py --report                    # the scores as they stand, running nothing

Results land in ``results/mutation/`` (``--out``): per row ``NAME.sqlite`` (the Cosmic Ray session: ``cr-report`` and
``cr-html`` read it), ``NAME.survivors.md`` (each surviving mutant's diff) and ``summary.json`` / ``summary.md`` (the
scores of every row run so far). One core: run it when the machine is otherwise quiet, and say the load average.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COSMIC_RAY = str(Path(sys.executable).parent / "cosmic-ray")  # the one installed beside this interpreter
CLIENT = '''import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"run")
sys.exit(int(s.makefile().readline().strip() or 3))
'''


@dataclass(frozen=True)
class Row:
    """One module under mutation and the tests that cover it."""

    files: tuple[str, ...]
    tests: tuple[str, ...]
    definitions: tuple[str, ...] = ()  # only these top-level functions/classes (empty: the whole module)


PRIVACY_TESTS = ("tests/privacy", "tests/audits/test_audit.py", "tests/audits/test_sampling.py",
                 "tests/audits/test_release.py", "tests/models/power/test_input_perturbation.py")
FEDERATION_TESTS = ("tests/federation/test_wire.py", "tests/federation/test_wire_bounds.py",
                    "tests/federation/test_malicious.py", "tests/federation/test_protocol.py",
                    "tests/federation/test_policy.py", "tests/federation/test_messages.py",
                    "tests/federation/test_coordinator.py", "tests/federation/test_party.py")
#: The one table: module -> what is mutated and the tests run against it. The federation's process modules (executor,
#: serve, launch, server_app, client_app) are left out: their tests start real Flower processes (a minute each), too
#: slow to run per mutant; tests/federation/test_flower.py and test_docs_page.py cover them.
MODULES: dict[str, Row] = {
    "families/consensus/node": Row(("cvxdp/families/consensus/node.py",),
                                   ("tests/families/consensus", "tests/federation/test_malicious.py",
                                    "tests/contract/test_families.py", "tests/privacy/test_subsampling.py",
                                    "tests/audits/test_sampling.py", "tests/privacy/test_secure_noise.py")),
    "families/graph/node": Row(("cvxdp/families/graph/node.py",),
                               ("tests/families/graph", "tests/federation/test_malicious.py",
                                "tests/contract/test_families.py")),
    "families/sharing/node": Row(("cvxdp/families/sharing/node.py",),
                                 ("tests/families/sharing", "tests/federation/test_malicious.py",
                                  "tests/audits/test_sharing.py", "tests/contract/test_families.py")),
    "federation/wire": Row(("cvxdp/federation/wire.py",), FEDERATION_TESTS),
    "federation/messages": Row(("cvxdp/federation/messages.py",), (*FEDERATION_TESTS,
                                                                   "tests/contract/test_families.py")),
    "federation/policy": Row(("cvxdp/federation/policy.py",), (*FEDERATION_TESTS,
                                                               "tests/cli/test_federation_cli.py")),
    "federation/party": Row(("cvxdp/federation/party.py", "cvxdp/federation/run_folder.py"),
                            (*FEDERATION_TESTS, "tests/federation/test_example.py", "tests/cli/test_federation_cli.py")),
    "federation/coordinator": Row(("cvxdp/federation/coordinator.py",), (*FEDERATION_TESTS,
                                                                         "tests/contract/test_families.py")),
    "privacy/accounting": Row(("cvxdp/privacy/accounting.py",), (*PRIVACY_TESTS, "tests/run/test_loop.py")),
    "privacy/events": Row(("cvxdp/privacy/events.py",), (*PRIVACY_TESTS, "tests/run/test_loop.py")),
    "privacy/composition": Row(("cvxdp/privacy/composition.py",), (*PRIVACY_TESTS, "tests/run/test_loop.py")),
    "privacy/calibration": Row(("cvxdp/privacy/calibration.py",), PRIVACY_TESTS),
    "privacy/distributions": Row(("cvxdp/privacy/distributions.py",), PRIVACY_TESTS),
    "privacy/mechanisms": Row(("cvxdp/privacy/mechanisms.py",), PRIVACY_TESTS),
    "privacy/noise": Row(("cvxdp/privacy/noise.py",), PRIVACY_TESTS),
    "audits/release": Row(("cvxdp/audits/release.py",), ("tests/audits", "tests/cli/test_audit_cmd.py")),
    "audits/statistics": Row(("cvxdp/audits/statistics.py",), ("tests/audits", "tests/cli/test_audit_cmd.py")),
    "audits/gamma": Row(("cvxdp/audits/gamma.py",), ("tests/audits", "tests/families/graph/test_mechanism.py")),
    "audits/sharing": Row(("cvxdp/audits/sharing.py",), ("tests/audits/test_sharing.py",
                                                          "tests/audits/test_sharing_checks.py")),
    "model/gradients": Row(("cvxdp/model/gradients.py",), ("tests/model/test_gradients.py",
                                                          "tests/model/test_gradient_rules.py",
                                                          "tests/model/test_agent.py", "tests/model/test_compiled.py")),
    "model/declaration-sampling": Row(("cvxdp/model/declaration.py",), ("tests/model/test_agent.py",
                                                                       "tests/privacy/test_subsampling.py",
                                                                       "tests/audits/test_sampling.py"),
                                      definitions=("poisson_sample", "PerExample")),
}

#: The operator replacements kept (Cosmic Ray swaps every binary operator for each of the 11 others and every comparison
#: for each of the 7 others, 55 % and 19 % of all mutants here; most of them crash at once on the floats and arrays of
#: these modules). Kept: one swap per operator, mutmut's (``+``/``-``, ``*``/``/``, ``//`` and ``%`` to ``/``, ``**``
#: to ``*``, the bitwise and shift operators among themselves, ``<``/``<=``, ``>``/``>=``, ``==``/``!=``,
#: ``is``/``is not``), and a comparison's direction flipped (``<`` to ``>``, ``<=`` to ``>=`` and back).
KEPT_SWAPS = {
    "ReplaceBinaryOperator": {("Add", "Sub"), ("Sub", "Add"), ("Mul", "Div"), ("Div", "Mul"), ("FloorDiv", "Div"),
                              ("Mod", "Div"), ("Pow", "Mul"), ("LShift", "RShift"), ("RShift", "LShift"),
                              ("BitAnd", "BitOr"), ("BitOr", "BitAnd"), ("BitXor", "BitAnd")},
    "ReplaceComparisonOperator": {("Lt", "LtE"), ("LtE", "Lt"), ("Gt", "GtE"), ("GtE", "Gt"), ("Eq", "NotEq"),
                                  ("NotEq", "Eq"), ("Is", "IsNot"), ("IsNot", "Is"), ("Lt", "Gt"), ("Gt", "Lt"),
                                  ("LtE", "GtE"), ("GtE", "LtE")},
}


def _kept(operator: str) -> bool:
    """Whether a Cosmic Ray operator's mutants run (see :data:`KEPT_SWAPS`)."""
    family, _, pair = operator.removeprefix("core/").partition("_")
    if family not in KEPT_SWAPS:
        return True
    source, _, target = pair.partition("_")
    return (source, target) in KEPT_SWAPS[family]


#: Surviving mutants that cannot change what the module computes (or only its speed), with the reason:
#: (file, the mutated line as the mutant has it, stripped) -> reason. Each is counted apart from the score.
_CACHE = "an lru_cache's size changes how often a pure function is computed again, not its value"
_ULPS = ("the Laplace search returns within a few ulps (OpenDP's map is Delta / scale on its lattice; "
         "tests/privacy/test_secure_noise.py checks at most 64): the loop's length and what follows it are never "
         "reached; the Gaussian bisection stops within 1e-10 of the same certified scale either way")
_START = ("a starting point or step of a bracketing search: the bracket still holds the root, and the solver and the "
          "check after it return the same value (to the search's tolerance, 1e-8 relative or tighter; tests/privacy/"
          "test_calibration.py checks the defining equation)")
EQUIVALENT: dict[tuple[str, str], str] = {
    ("cvxdp/families/consensus/node.py", "return lambda value: value - plan.sample(rng, value.size)"):
        "Laplace and Gaussian noise are symmetric: value - xi has the law of value + xi (the same mechanism; a "
        "seeded run draws other bits)",
    **{("cvxdp/families/graph/node.py", line): "a one-entry list or array: its first entry is its last"
       for line in ("self.alpha1 = float(mechanism.alphas([agent.name])[ -1]) if self.private else None",
                    "self.recycling)[ -1])")},
    **{("cvxdp/families/graph/node.py", f'self.gamma = float(getattr(algorithm, "gamma", {v}))'):
       "the default is read only for algorithms without gamma (M-ADMM, DVP), which never run a recycled step, the "
       "only reader of self.gamma" for v in ("-1.0", "1.0")},
    ("cvxdp/families/graph/node.py", "if self.recycling or agent.constraints:"):
        "compiles a projection that only recycled steps read: M-ADMM with constraints compiles one it never uses",
    **{("cvxdp/families/graph/node.py", f'self._last: tuple[float, SolveReport] = ( {v}, SolveReport(solver="recycled"))'):
       "the diagnostic of the last step before any step: a node is evaluated only after it stepped"
       for v in ("1.0", "-1.0")},
    **{("cvxdp/families/sharing/node.py", "mechanism: Any = None, accountant: str = \"pld\", b1: float | None = None, "
        f"parties: int = {n}) -> None:"): "a default no caller uses: the one place that builds a sharing node "
       "(cvxdp.federation.messages.build_node) passes the run's number of parties" for n in (0, 2)},
    **{("cvxdp/families/sharing/node.py", f'self.last: dict[str, Any] = {{"noise_norm": {a}, "solver_time": {b}, '
        '"solver": "", "fallbacks": []}'): "the diagnostics of the last step before any step: a party is "
       "evaluated only after it stepped" for a, b in (("1.0", "0.0"), ("-1.0", "0.0"), ("0.0", "1.0"),
                                                      ("0.0", "-1.0"))},
    ("cvxdp/families/consensus/node.py", "keep_polish: bool = True"):
        "a default no message uses: the server and the wire always set keep_polish",
    **{("cvxdp/families/consensus/node.py", line): "two measured times exactly equal (to the last bit) decide only "
       "whether a diagnostic warning shows" for line in (
           'if t["warned"] or t["gradient"] <= SLOW_GRADIENT_SECONDS or t["gradient"] <= t["solve"]:',
           'if t["warned"] or t["gradient"] < SLOW_GRADIENT_SECONDS or t["gradient"] < t["solve"]:')},
    ("cvxdp/families/consensus/node.py", "if not TYPE_CHECKING:  # annotations only"):
        "the names imported for annotations import at run time too (no cycle), and annotations are never evaluated",
    ("cvxdp/families/consensus/node.py", 'self.timing = {"gradient": 0.0, "solve": -1.0, "warned": False}'):
        "the solve time only matters once the gradients took SLOW_GRADIENT_SECONDS (0.5 s): a second's head start "
        "for the solves at most delays a diagnostic warning, never a release",
    **{("cvxdp/families/consensus/node.py", line): "which caller's frame the diagnostic warning names"
       for line in ('"the flat local vector) or write the objective with the covered atoms.", agent=self.name), '
                    'stacklevel= 3)', '"the flat local vector) or write the objective with the covered atoms.", '
                    'agent=self.name), stacklevel= 1)')},
    **{("cvxdp/privacy/noise.py", f"@functools.lru_cache(maxsize={n})"): _CACHE for n in (0, 2, 127, 129, 511, 513)},
    **{("cvxdp/privacy/distributions.py", f"secure_ulps: ClassVar[int] = {n}"): _ULPS for n in (63, 65)},
    **{("cvxdp/privacy/distributions.py", f"secure_ulps: ClassVar[int] = {n}"):
       "the base's 0 (Gaussian's): 1 ulp tried, or none, then the scale raised by 1e-12 relative before the "
       "bisection, which stops within 1e-10 of the same certified scale" for n in (1, -1)},
    ("cvxdp/privacy/distributions.py", "norm: ClassVar[int] = -1"):
        "the base class's unset norm: 0 and -1 are both outside {1, 2}, so register refuses a subclass that sets "
        "none either way (tests/privacy/test_distributions.py)",
    ("cvxdp/privacy/distributions.py", "removed: @staticmethod"):
        "Noise.from_name is only ever called on a class, where a plain function and a static method are the same",
    **{("cvxdp/privacy/noise.py", line): _ULPS for line in (
        "while hi / lo - 1.0 >= 1e-10:", "s *= 1.0 - 1e-12", "s /= 1.0 + 1e-12", "s *= 2.0 + 1e-12",
        "s *= 0.0 + 1e-12", "s *= 1.0 + 1.000000000001", "s *= 1.0 + -0.999999999999")},
    ("cvxdp/privacy/noise.py", "def opendp_epsilon(noise: str, scale: float, sensitivity: float, n: int = 1, "
                               "delta: float = -1.0) -> float:"):
        "the default delta is never used: Laplace's map ignores it, and a Gaussian call without delta is refused "
        "either way (0 and -1 are both outside (0, 1))",
    ("cvxdp/privacy/noise.py", "def opendp_epsilon(noise: str, scale: float, sensitivity: float, n: int = 1, "
                               "delta: float = 1.0) -> float:"):
        "the default delta is never used: Laplace's map ignores it, and a Gaussian call without delta is refused "
        "either way (0 and 1 are both outside (0, 1))",
    ("cvxdp/privacy/noise.py", "def opendp_epsilon(noise: str, scale: float, sensitivity: float, n: int = 2, "
                               "delta: float = 0.0) -> float:"):
        "OpenDP's maps do not depend on the vector's length (l1 / l2 distance of the whole vector)",
    ("cvxdp/privacy/noise.py", "def opendp_rho(scale: float, sensitivity: float, n: int = 2) -> float:"):
        "OpenDP's maps do not depend on the vector's length (l1 / l2 distance of the whole vector)",
    ("cvxdp/privacy/noise.py", "n: int = 2) -> float:"):
        "secure_scale's default n: OpenDP's maps do not depend on the vector's length",
    ("cvxdp/privacy/noise.py", "def opendp_epsilon(self, n: int = 2) -> float:"):
        "OpenDP's maps do not depend on the vector's length (l1 / l2 distance of the whole vector)",
    ("cvxdp/privacy/noise.py", "GRANULARITY_BITS = 99"):
        "OpenDP's lattice is 2^-99 instead of 2^-100 of the noise scale: both some 30 orders of magnitude below it, "
        "no certified epsilon or scale moves (tests/privacy/test_secure_noise.py checks 1 ulp-level agreement)",
    ("cvxdp/privacy/noise.py", "except CosmicRayTestingException:  # pragma: no cover - OpenDP releases without the "
                               "``nan`` flag"):
        "the clause is for OpenDP releases without the nan flag; the installed one raises nothing there",
    ("cvxdp/privacy/noise.py", "removed: @functools.lru_cache(maxsize=128)"): _CACHE,
    ("cvxdp/privacy/noise.py", "return opendp_epsilon(noise, x, d, m, delta) < e"):
        "only an exact tie at epsilon differs: the search then takes one more ulp (or bisection step) of noise",
    ("cvxdp/privacy/noise.py", "lo, hi = hi, hi * 2.25"): _ULPS,
    **{("cvxdp/privacy/noise.py", "def secure_scale(noise: str, sensitivity: float, scale: float, epsilon: float, "
                                  f"delta: float = {d},"):
       "the default delta is never used: Laplace's map ignores it, and a Gaussian call without delta is refused "
       "either way (0, 1 and -1 are all outside (0, 1))" for d in ("1.0", "-1.0")},
    **{("cvxdp/privacy/distributions.py", line): _START for line in (
        "guess = math.log(math.sqrt(2.0 / math.log(1.25 / delta)) / epsilon)",
        "guess = math.log(math.sqrt(2.0 * math.log(1.25 / delta)) * epsilon)",
        "guess = math.log(math.sqrt(2.0 * math.log(1.25 * delta)) / epsilon)",
        "guess = math.log(math.sqrt(3.0 * math.log(1.25 / delta)) / epsilon)",
        "guess = math.log(math.sqrt(1.0 * math.log(1.25 / delta)) / epsilon)",
        "guess = math.log(math.sqrt(2.0 * math.log(2.25 / delta)) / epsilon)",
        "guess = math.log(math.sqrt(2.0 * math.log(0.25 / delta)) / epsilon)",
        "while gap(hi) > -1.0:", "while gap(hi) > 1.0:", "while gap(hi) >= 0.0:", "while gap(lo) < 0.0:",
        "lo -= 2.0", "lo -= 0.0", "hi += 2.0", "lo += 1.0",
        "return steps * epsilon", "return gaussian_sigma_analytic(1.0, epsilon, delta) / math.sqrt(steps)",
        "return gaussian_sigma_analytic(2.0, epsilon, delta) * math.sqrt(steps)",
        "return gaussian_sigma_analytic(0.0, epsilon, delta) * math.sqrt(steps)",
        "while gap(lo) <= 1.0:  # the profile decreases in sigma: move down until delta(lo) > delta",
        "root = optimize.brentq(gap, lo, hi, xtol=1e-15, rtol=5 * np.finfo(float).eps, maxiter=500)",
        "root = optimize.brentq(gap, lo, hi, xtol=1e-15, rtol=3 * np.finfo(float).eps, maxiter=500)",
        "root = optimize.brentq(gap, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=499)",
        "root = optimize.brentq(gap, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=501)",
        "while gap(lo) < 0.0:  # the profile decreases in sigma: move down until delta(lo) > delta")},
    **{("cvxdp/privacy/calibration.py", line): _START for line in (
        "hi *= 3.0", "hi *= 1.0", "lo /= 3.0", "lo /= 1.0", "for _ in range(201):", "for _ in range(199):")},
    **{(f, f"@functools.lru_cache(maxsize={n})"): _CACHE for n in (255, 257)
       for f in ("cvxdp/privacy/calibration.py", "cvxdp/privacy/distributions.py")},
    **{(f, "removed: @functools.lru_cache(maxsize=256)"): _CACHE
       for f in ("cvxdp/privacy/calibration.py", "cvxdp/privacy/distributions.py")},
    ("cvxdp/privacy/calibration.py", "while composed_epsilon(((make_event(noise, scale / d, q), st),), dl, "
                                     "accountant) >= e:"):
        "only an exact tie at epsilon differs (a Laplace total under PLD can be exactly epsilon): the scale then "
        "grows by 1e-12 relative",
    ("cvxdp/privacy/calibration.py", "return x - xi, InputRelease(self.noise, float(scale), float(sens), event, "
                                     "float(self.epsilon), delta)"):
        "Laplace and Gaussian noise are symmetric about 0: x - xi has the law of x + xi",
    **{("cvxdp/privacy/calibration.py", line): _START for line in (
        "if epsilon_of(hi) < e:", "while epsilon_of(lo) < e:")},
    ("cvxdp/privacy/distributions.py", "while gap(root) >= 0.0:"):
        "only an exact tie at delta differs: the root then moves one more ulp up (more noise)",
    ("cvxdp/privacy/distributions.py", "if log_b > log_a:"):
        "only an exact tie differs, where delta is zero to the last bit (log a = log b needs a ratio or epsilon "
        "far past any noise the library calibrates)",
    ("cvxdp/privacy/calibration.py", "def perturb(self, values: np.ndarray, /, l1: float, l2: float,"):
        "'*' became '/' in the signature: values (passed by position everywhere) is positional-only and l1, l2 may "
        "still be passed by keyword, so every call means the same",
    ("cvxdp/model/declaration.py", "return np.flatnonzero(rng.random(n) <= q)"):
        "rng.random draws multiples of 2^-53: U == q has probability at most 2^-53",
    **{("cvxdp/model/gradients.py", line): (
        'an un-broadcast sum over no axis, or over axes of size 1 in both shapes, or without keepdims '
        "before the reshape to the operand's shape: the same array"
    ) for line in (
        'if extra >= 0:',
        'if extra > -1:',
        'axes = tuple(k for k, n in enumerate(shape) if n == 1 and g.shape[k] != 0)',
        'g = np.sum(g, axis=axes, keepdims=False)',
    )},
    **{("cvxdp/model/gradients.py", line): (
        "the first of one argument's shapes (or keys) is its last; a division's operands, a stack's pieces "
        'are broadcast to (or required to have) the same number of dimensions'
    ) for line in (
        'sa = shapes[ 1]',
        'sa = shapes[ -1]',
        'shape, back, order = e.shape, shapes[ -1], e.order',
        'shape, back = e.shape, shapes[ -1]',
        'a2 = (1, sa[ -1]) if len(sa) == 1 else sa',
        'b2 = (sb[ -1], 1) if len(sb) == 1 else sb',
        'axis, keepdims, back = e.axis, e.keepdims, shapes[ -1]',
        'return self._picked(kids, e._orig_key, shapes[ -1], e.shape, repeats=False)',
        'return self._picked(kids, e.key, shapes[ -1], e.shape, repeats=True)',
        'axis = 0 if (horizontal and len(shapes[ -1]) == 1) else (1 if horizontal else 0)',
        'return (kids[ -1], slot)',
    )},
    **{("cvxdp/model/gradients.py", line): (
        'unreachable: CVXPY never builds a MulExpression with a scalar operand (it builds multiply), so one'
        ' side empty and both empty never differ'
    ) for line in (
        'if not sa and not sb:  # CVXPY multiplies elementwise when one side is a scalar',
    )},
    **{("cvxdp/model/gradients.py", line): (
        'CVXPY keeps sparse constants as csc_array, whose product with a dense operand is already an '
        "ndarray of the product's shape: both forward closures give the same value"
    ) for line in (
        'if not a in self.sparse or b in self.sparse:',
        'if a in self.sparse and b in self.sparse:',
    )},
    **{("cvxdp/model/gradients.py", line): (
        "which branch of _matmul's adjoint a vector or matrix product takes: the general branch computes "
        'the same adjoint (A^T D, D B^T), and the outer product of a vector by data is it too'
    ) for line in (
        'if len(sa) == 3 and len(sb) == 1 and not na:  # the common ``A @ x`` (A data, possibly sparse)',
        'if len(sa) == 2 and len(sb) != 1 and not na:  # the common ``A @ x`` (A data, possibly sparse)',
        'if len(sa) == 2 and len(sb) == 2 and not na:  # the common ``A @ x`` (A data, possibly sparse)',
        'if len(sa) == 2 and len(sb) == 0 and not na:  # the common ``A @ x`` (A data, possibly sparse)',
        'elif len(sa) != 2 and len(sb) == 1 and not nb:  # ``X @ c`` (c data)',
        'elif len(sa) == 3 and len(sb) == 1 and not nb:  # ``X @ c`` (c data)',
        'elif len(sa) == 1 and len(sb) == 1 and not nb:  # ``X @ c`` (c data)',
        'elif len(sa) == 2 and len(sb) == 0 and not nb:  # ``X @ c`` (c data)',
    )},
    **{("cvxdp/model/gradients.py", line): (
        "(B d^T)^T = d B^T for a dense or sparse B (to rounding far below the tests' 1e-9)"
    ) for line in (
        'dA = np.asarray(d @ B.T) if  sp.issparse(B) else np.asarray((B @ d.T).T)',
        'dA = np.asarray(d @ B.T) if not not sp.issparse(B) else np.asarray((B @ d.T).T)',
    )},
    **{("cvxdp/model/gradients.py", line): (
        'a basic index (a slice or an int) cannot repeat an entry: np.add.at adds what += adds'
    ) for line in (
        'return self._picked(kids, e._orig_key, shapes[0], e.shape, repeats=True)',
    )},
    **{("cvxdp/model/gradients.py", line): (
        "'*' became '/' in the signature: the only callers pass the argument after it by keyword"
    ) for line in (
        'def _picked(kids, key, back, shape, /, repeats: bool):',
        'def compile_gradient(objective: cp.Expression, layout: Any, /, name: str = "") -> CompiledGradient'
        ' | None:',
    )},
    **{("cvxdp/model/gradients.py", line): (
        'the bounds of the sweep that marks the forward values needed: indices past the tape or below 0 are'
        ' never needed, and slot 0 is a leaf with no children'
    ) for line in (
        'for i in range(len(self.fwd) + 1, -1, -1):',
        'for i in range(len(self.fwd) - 0, -1, -1):',
        'for i in range(len(self.fwd) - 1, ~1, -1):',
        'for i in range(len(self.fwd) - 1, not 1, -1):',
        'for i in range(len(self.fwd) - 1, - 2, -1):',
        'for i in range(len(self.fwd) - 1, - 0, -1):',
    )},
    **{("cvxdp/model/gradients.py", line): (
        'no reverse rule writes into an adjoint in place (_acc adds into a new array): the flag never fires'
    ) for line in (
        '_ONE.flags.writeable = True  # adjoints are never written in place',
    )},
    **{("cvxdp/model/gradients.py", line): (
        'a float64 array goes through np.asarray(value, dtype=float), which returns it unchanged; the other'
        ' real values CVXPY stores compute the same numbers (complex data is no longer compiled)'
    ) for line in (
        'if type(value) is np.ndarray and value.dtype != np.float64:',
    )},
    ("cvxdp/model/gradients.py", "return d[ -1] * float(p) if p is not None and (p == 0 or is_power2(p)) else inf"):
        "the first of one argument's degrees is its last",
    **{("cvxdp/model/gradients.py", line): "CVXPY broadcasts both operands of a batched product to the same number "
       "of dimensions (A3 @ x multiplies (2, 3, 4) by (1, 4, 1)), so either one above 2 (or 3) refuses the same "
       "products" for line in (
           "if len(sa) > 3 or len(sb) > 2:  # the rules below are for vectors and matrices",
           "if len(sa) > 2 and len(sb) > 2:  # the rules below are for vectors and matrices",
           "if len(sa) > 2 or len(sb) > 3:  # the rules below are for vectors and matrices")},
    ("cvxdp/federation/messages.py", "def read_request(data: bytes, /, max_bytes: int) -> tuple[str, dict[str, Any]]:"):
        "'*' became '/' in the signature: every caller passes data by position and max_bytes by keyword",
    ("cvxdp/federation/messages.py", "weight = (penalty_schedule(algorithm, names)( 2) if recycling else "
     "algorithm.thetas(names))[index]"):
        "R-ADMM's penalty eta_i(t) = eta_i(1) q^((t + 1) // 2): an even iteration reuses the odd one's, so rounds 1 "
        "and 2 have the same weight",
    ("cvxdp/privacy/distributions.py", "return scale / 1.0"):
        "scale / 1.0 and scale * 1.0 are the same float",
    ("cvxdp/federation/coordinator.py", "msgs = dict(zip(self.names, (a[ -1] for a in args)))"):
        "each node's args is the one-tuple (message,) the loop builds (Node.step takes one message): its last entry "
        "is its first",
    **{("cvxdp/federation/coordinator.py", line): "a restore's args are the one-tuples (state,) of the states this "
       "backend gave, each {'round': the same round}: first and last agree" for line in (
           'self.round = args[ -1][0]["round"]', 'self.round = args[0][ -1]["round"]')},
    ("cvxdp/federation/coordinator.py", 'result = run_loop(family, backend=backend, agents=None, '
     'root=np.random.SeedSequence( 1), seed=run.get("seed"),'):
        "run_loop reads root only when it holds the agents (to spawn their noise streams); a federation passes "
        "agents=None: each party draws from its own entropy",
    ("cvxdp/federation/party.py", "if sys.version_info > (3, 11):"):
        "sys.version_info has five entries, so it is never equal to (3, 11): > and >= agree",
    ("cvxdp/federation/party.py", 'if not isinstance(table.get(key, key != "evaluate"), bool):'):
        "the default is a bool either way",
    **{("cvxdp/federation/party.py", line): "'*' became '/' in the signature: every caller passes the arguments "
       "after it by keyword" for line in (
           "def _refuse(party: str, round: int | None, message: str, /, reason: str, field: str | None = None",
           "def _check_limits(self, name: str, msg: Any, t: int, /, exact: bool) -> None:")},
    **{("cvxdp/federation/party.py", f'rounds = int(getattr(run.algorithm, "rounds", None) or '
        f'getattr(run.algorithm, "epochs", {n}))'): "a default never read: the party's policy refuses an algorithm "
       "without rounds of at least 1" for n in (1, -1)},
    ("cvxdp/federation/party.py", "node = self._node(algorithm, name, info, start, np.random.SeedSequence( 1))  "
     "# its generator is restored"):
        "the seed of a node that is restored at once: every node's restore overwrites its generator's state (and a "
        "graph node's seeded start value)",
    ("cvxdp/federation/run_folder.py", "self.evaluated = -1  # the last round in evaluation.csv"):
        "evaluated rounds are at least 1 (round 0 is refused): t > -1 and t > 0 agree",
    ("cvxdp/federation/run_folder.py", "return -1"):
        "evaluated rounds are at least 1 (round 0 is refused): -1 and 0 agree",
    **{("cvxdp/federation/run_folder.py", f"self.seen = {v}"): "read only while the run has an owner, and whatever "
       "sets an owner sets seen at the same moment" for v in ("1.0", "-1.0")},
    **{("cvxdp/federation/run_folder.py", line): "differs only when exactly 8 bytes remain with a record header "
       "claiming size 0, which the party never writes" for line in (
           "while pos + 9 <= len(data):", "while pos + 8 < len(data):")},
    ("cvxdp/federation/run_folder.py", "if keep <= len(data):"):
        "a file truncated to its own length is unchanged",
    **{("cvxdp/federation/coordinator.py", line): "'*' became '/' in the signature: every caller passes the "
       "arguments after it by keyword" for line in (
           "def send(self, requests: Mapping[str, tuple[str, dict[str, Any]]], /, round: int | None = None,",
           "def call(self, method: Callable[..., Any], args: Sequence[tuple] | None = None, /,",
           "def run_federation(plan: Mapping[str, Any], channel: Channel, /, progress: bool = False) -> Result:")},
    **{("cvxdp/privacy/composition.py", f"@functools.lru_cache(maxsize= {n})"): _CACHE for n in (4095, 4097)},
    ("cvxdp/privacy/composition.py", "removed: @functools.lru_cache(maxsize=4096)"): _CACHE,
    ("cvxdp/privacy/composition.py", "if not do_compose:"):
        "dp-accounting's compose calls _maybe_compose twice, first without composing (to check the event is "
        "supported), then composing: the mutant composes on the first call instead of the second",
    **{("cvxdp/privacy/composition.py", f"self._pld = self._pld.compose(step.self_compose(count) if {c} else step)"):
       "a PLD composed once with itself (count 1) is that PLD" for c in ("count >= 1", "count > 0")},
    ("cvxdp/privacy/composition.py", "estimate = sum(c * event_size(e) for e, c in grouped)"):
        "a fallback for an infinite RDP estimate, which positive multipliers never give (pragma: no cover)",
    ("cvxdp/privacy/composition.py", "and multiplier_of(e) <= PLD_MIN_GAUSSIAN_MULTIPLIER for e, _ in grouped):"):
        "a multiplier of exactly 0.05 takes RDP's upper bound instead of PLD's: both are valid totals",
    ("cvxdp/privacy/events.py", "return 2.0 / event.epsilon"):
        "a pure event's size, scaled by 2 for every pure event alike: the order and the relative merge test "
        "(size <= head's size x (1 + 1e-9)) are the same",
    **{("cvxdp/privacy/events.py", f'return getattr(event, "noise_multiplier", {v})'):
       "the size of an event without a multiplier: only a NoOp has none, and group_events drops NoOps before any "
       "size is read" for v in ("1.0", "-1.0")},
    ("cvxdp/privacy/events.py", "and event_size(event) < event_size(head) * (1.0 + MERGE_RTOL)):"):
        "two events of one kind with exactly the same size are the same event (frozen dataclasses of the same "
        "values), already one key of the counts: the tie never reaches the merge",
    **{("cvxdp/privacy/mechanisms.py", line): "'*' became '/' in the signature: every caller passes agent by "
       "position and the rest by keyword, so every call means the same" for line in (
           "def calibrated_sensitivity(self, agent: object, /, min_weight: float, separable: bool) -> float:",
           "def noise_plan(self, agent: object, /, min_weight: float, separable: bool, steps: int,")},
    **{("cvxdp/privacy/mechanisms.py", f"claim = (step_epsilon(self.noise, delta_s, scale, {v}), 0.0)"):
       "the delta of a pure (Laplace) step's epsilon: Laplace.epsilon ignores it (sensitivity / scale)"
       for v in ("1.0", "-1.0")},
    **{("cvxdp/privacy/mechanisms.py", line): "the vector length handed to OpenDP's certification: its Laplace and "
       "Gaussian maps bound the l1 / l2 distance of the whole vector, whatever its length (the same reason as "
       "secure_scale's default n in noise.py)" for line in (
           'n = getattr(getattr(agent, "layout", None), "size", 2)',
           'n = getattr(getattr(agent, "layout", None), "size", 0)',
           "n = n if not isinstance(n, int) and n >= 1 else 1", "n = n if isinstance(n, int) or n >= 1 else 1",
           "n = n if isinstance(n, int) and n <= 1 else 1", "n = n if isinstance(n, int) and n > 1 else 1",
           "n = n if isinstance(n, int) and n >= 2 else 1", "n = n if isinstance(n, int) and n >= 0 else 1",
           "n = n if isinstance(n, int) and n >= 1 else 2", "n = n if isinstance(n, int) and n >= 1 else 0")},
    **{("cvxdp/federation/policy.py", line): "'*' became '/' in the signature: every caller passes the arguments "
       "after it by keyword and the ones before it by position, so every call means the same" for line in (
           "def check_rounds(self, rounds: int, /, party: str) -> None:",
           "def check_weight(self, name: str, value: float, /, party: str, round: int, field: str) -> None:",
           "def mechanism_for(self, agent: str, /, party: str) -> Any:",
           "def accept(self, algorithm: Mapping[str, Any], privacy: Mapping[str, Any], accountant: str, /,",
           "def note(self, run: str, reason: str, /, voids: bool = True) -> None:")},
    **{("cvxdp/federation/policy.py", f'self.limits.check_rounds(int(getattr(alg, "rounds", None) or '
        f'getattr(alg, "epochs", {n})), party=party)'): "a default never read: every algorithm of the catalog has a "
       "rounds parameter of at least 1 (check_int), so the 'or' never reaches epochs' default" for n in (1, -1)},
    ("cvxdp/federation/policy.py", "for key in sorted(set(mine) & set(given)):"):
        "mine and given describe the same mechanism (the names are compared just before), whose describe() always "
        "has the same keys: their union is their intersection",
    ("cvxdp/federation/policy.py", 'table["alpha"] = 2.0'):
        "a placeholder rate for a graph mechanism's description, popped from it right after: no other described "
        "value depends on it",
    ("cvxdp/federation/policy.py", 'if data or not data.endswith(b"\\n"):  # a torn last record: it was never '
     'synced, so nothing it recorded left'):
        "a file that ends with a newline is truncated to its own length (nothing changes), an empty one to zero",
    ("cvxdp/federation/policy.py", "append_synced(self.path, (json.dumps(r, sort_keys=False, default=float) for r in "
     "records))"):
        "the order of a record's keys on disk: every reader parses the record back into a dict",
    **{("cvxdp/federation/policy.py", f"if self.budget is None or charge[1][0] {op}:"):
       "a zero-epsilon charge then reaches the ledger's own check, which composes it to the same total (every "
       "recorded charge passed that check, so the total is inside the budget) and answers no as well"
       for op in ("< 0", "<= -1")},
    **{("cvxdp/privacy/accounting.py", f"if claim is not None and type(count) is int and count {c}:  # noqa: E721 - "
        "not bool, not numpy"): "a count of 0 for a charge already recorded: the fast path adds 0, the slow one "
       "checks the same inputs again and records nothing for a zero count; the ledger is the same"
       for c in ("> 0", ">= 1")},
    **{("cvxdp/privacy/accounting.py", f"self._last_round = {v}  # ... and the last round they fit every agent"):
       "never read before it is set: _charges starts as None, never equal to a tuple of charges, so the first "
       "exceeds sets _last_round before any comparison" for v in ("1", "-1")},
    **{("cvxdp/privacy/accounting.py", f"self._charges, fit = key, {e}"):
       "exceeds checks 1 <= round <= rounds, and each charge's fit is at most rounds - round + 1 (the limit it "
       "searches), so a larger start is absorbed by the min (with no charges both say False)"
       for e in ("rounds + round + 1", "rounds - round + 2")},
    **{("cvxdp/privacy/accounting.py", f"fit = min(fit, self._rounds_that_fit(ledger, agent, event, count, claim, "
        f"{e}))"): "a larger search limit: repeats_within returns min(rounds that fit, limit), which the outer "
       "min caps at rounds - round + 1 anyway; only the bisection's work differs"
       for e in ("rounds + round + 1", "rounds - round + 2")},
    ("cvxdp/privacy/accounting.py", "cache = (others, position, item, entries.get(item, -1), count, limit)  # agents "
     "with equal records share it"):
        "the default marks a charge not recorded yet; a stored count is at least 1 (record stores only n > 0), so 0 "
        "and -1 both mark it uniquely and the cache keys separate the same cases",
    ("cvxdp/privacy/accounting.py", "if n == 0 or k_max == -1:"):
        "the limit is checked to be at least 0, so it is never -1; with a limit of 0 both return 0 (the arguments are "
        "checked before the early return)",
    **{("cvxdp/audits/sharing.py", line): "the chunk size of the sampler's draws: one generator stream drawn in "
       "chunks of a and b values equals one draw of a + b (numpy's normal), so every trial's release is the same"
       for line in ("chunk = max( 2, 2_000_000 // n_samples)", "chunk = max(1, 2000001 // n_samples)",
                    "chunk = max(1, 1999999 // n_samples)")},
    **{("cvxdp/audits/sharing.py", line): "the unit vector is the first row of np.eye(rows, N, k), the k-th unit "
       "vector whatever the number of rows (one row: its last is its first)" for line in (
           "u = diff / shift if shift > 0 else np.eye( 2, len(diff), 0)[0]",
           "u = diff / shift if shift > 0 else np.eye(1, len(diff), 0)[ -1]",
           "u = np.eye( 2, len(diff), int(np.argmax(np.abs(diff))))[0]",
           "u = np.eye(1, len(diff), int(np.argmax(np.abs(diff))))[ -1]",
           "direction = np.eye( 2, target.data.shape[0], row)[0]",
           "direction = np.eye(1, target.data.shape[0], row)[ -1]")},
    ("cvxdp/audits/sharing.py", "stats_ = np.empty(( 4, n))"): "a fourth row that is never written or read",
    ("cvxdp/audits/sharing.py", "for j, (which, run_seed) in enumerate(zip(inputs, _run_seeds(int(child.generate_state"
     "( 2)[0]), b))):"):
        "the first word of SeedSequence.generate_state(2) is generate_state(1)'s",
    **{("cvxdp/audits/sharing.py", line): "the last entry of a one-entry array is its first" for line in (
        "for j, (which, run_seed) in enumerate(zip(inputs, _run_seeds(int(child.generate_state(1)[ -1]), b))):",
        "stats_[j, i] = transcript_statistic(np.stack(sent)[:, None, :], direction)[ -1]")},
    **{("cvxdp/audits/sharing.py", line): "which trial's runs give the claim: every run spends exactly epochs charges "
       "of one plan fixed by public shapes, the bound, b1, the number of parties and the epochs (no stopping rule, "
       "no budget), and trials are at least 10, so every trial's ledger is the same"
       for line in ("if not i == 0:", "if i != 0:", "if i == 1:")},
    ("cvxdp/audits/statistics.py", "safe = np.where(first == 0.0, 2.0, first)"):
        "the divisor where the first round released 0, whose ratio np.where then discards (0 either way)",
    **{("cvxdp/audits/gamma.py", line): "f is a cp.Variable(1): f, u and each node's local solution have one entry, "
       "the last is the first" for line in (
           "return float(-C / B * labels.value.sum() * u[ -1] + 0.5 * reg * u[0] ** 2)",
           "return float(-C / B * labels.value.sum() * u[0] + 0.5 * reg * u[ -1] ** 2)",
           "return float(C / B * np.logaddexp(0.0, -labels.value * u[0]).sum() + 0.5 * reg * u[ -1] ** 2)",
           "return float(C / B * np.logaddexp(0.0, -labels.value * u[ -1]).sum() + 0.5 * reg * u[0] ** 2)",
           "return np.array([-C / B * float(labels.value.sum()) + reg * u[ -1]])",
           "return np.array([-C / B * float(labels.value @ (1.0 / (1.0 + np.exp(labels.value * u[ -1]))))",
           "+ reg * u[ -1]])",
           "p = 1.0 / (1.0 + np.exp(-labels.value * u[ -1]))",
           "objective = C / B * cp.sum(cp.logistic(-cp.multiply(labels, f[ -1]))) + 0.5 * reg * cp.sum_squares(f)",
           "objective = -C / B * cp.sum(labels) * f[ -1] + 0.5 * reg * cp.sum_squares(f)",
           "outs.append(np.array([res.local[a.name][ -1] for a in agents]))")},
    ("cvxdp/audits/gamma.py", "lin = base + C / B / y1 * e1"): "y1 is +1 or -1, its own reciprocal",
    **{("cvxdp/audits/gamma.py", line): "the logistic Hessian's p (1 - p) is the same for p and 1 - p, the sigmoid of "
       "the other sign" for line in ("p = 1.0 / (1.0 + np.exp(labels.value * u[0]))",
                                     "p = 1.0 / (1.0 + np.exp(+labels.value * u[0]))")},
    **{("cvxdp/audits/gamma.py", f"y[ {i}] = first"): "every sample is x = 1, so the objective depends on the labels "
       "as a multiset: which sample carries the flipped label changes nothing" for i in ("1", "-1")},
    ("cvxdp/audits/gamma.py", "[int(c.generate_state(1)[ -1]) for c in np.random.SeedSequence(s).spawn(3)]"):
        "the last entry of a one-entry array is its first",
    ("cvxdp/audits/gamma.py", "[int(c.generate_state( 2)[0]) for c in np.random.SeedSequence(s).spawn(3)]"):
        "the first word of SeedSequence.generate_state(2) is generate_state(1)'s",
    **{("cvxdp/audits/release.py", line): "the audit agent's CVXPY objective is never read: LinearizedADMM's step, "
       "the box projection and the ledger use its declared gradient (the subsampled agent's step its PerExample "
       "gradient); the audit results were bitwise the same over 4 mechanisms and 3 twins" for line in (
           'agent = Agent("audit", 1.5 * cp.sum_squares(x - data), [x >= -bound, x <= bound], shared={"x": x},',
           'agent = Agent("audit", 0.5 * cp.sum(cp.multiply( 2.0 + data, cp.square(x))), [x >= -bound, x <= bound],',
           'agent = Agent("audit", 0.5 * cp.sum(cp.multiply( 0.0 + data, cp.square(x))), [x >= -bound, x <= bound],',
           'agent = Agent("audit", 0.5 * cp.sum_squares(x + data), [x >= -bound, x <= bound], shared={"x": x},',
           'agent = Agent("audit", 1.5 * cp.sum(cp.multiply(1.0 + data, cp.square(x))), [x >= -bound, x <= bound],',
           'return Agent("audit", 1.0 * cp.sum(x), [x >= -bound, x <= bound], shared={"x": x},',
           'return Agent("audit", -1.0 * cp.sum(x), [x >= -bound, x <= bound], shared={"x": x},',
           'return Agent("audit", 0.0 / cp.sum(x), [x >= -bound, x <= bound], shared={"x": x},')},
    **{("cvxdp/audits/release.py", f"gradient=lambda u: np.zeros( {n}),"): "the full gradient of a subsampled "
       "agent is never called (its step reads the per-example gradients; a gradient that raises leaves the audit "
       "unchanged)" for n in (0, 2)},
    **{("cvxdp/audits/release.py", line): "a subsampled Gaussian plan reads only the agent's name and its "
       "PerExample's public part (total, relation), not the bound, records or public gradient; separable matters "
       "only for OutL, which is never subsampled" for line in (
           'plan = mech.noise_plan(_sampled_agent(n, False, total, 0.0), min_weight=c, separable=True, steps=1, '
           'accountant="pld")',
           'plan = mech.noise_plan(_sampled_agent(n, True, total, 1.0), min_weight=c, separable=True, steps=1, '
           'accountant="pld")',
           'plan = mech.noise_plan(_sampled_agent(n, False, total, 1.0), min_weight=c, separable=False, steps=1, '
           'accountant="pld")',
           'plan = mech.noise_plan(_sampled_agent(n, False, total, 2.0), min_weight=c, separable=True, steps=1, '
           'accountant="pld")',
           "def _sampled_agent(records: int, added: bool, total: int, bound: float, regularizer: float = 1.0) -> "
           "Agent:",
           "def _sampled_agent(records: int, added: bool, total: int, bound: float, regularizer: float = -1.0) -> "
           "Agent:")},
    **{("cvxdp/audits/release.py", line): "the declared agent's size and separability: read only by OutL on a set "
       "that is not a box (these are boxes) and by OpenDP's secure scale, which clamps a size of 0 to 1 and gave "
       "the same scale for sizes 1 and 2 (4 mechanisms, 5 epsilons, 5 sensitivities)" for line in (
           "plan = mech.noise_plan(_declared_agent(d, 2, b), min_weight=1.0, separable=True, steps=1,",
           "plan = mech.noise_plan(_declared_agent(d, 0, b), min_weight=1.0, separable=True, steps=1,",
           'honest = mech.noise_plan(_declared_agent(d, 1, "none"), min_weight=c, separable=False, steps=1,',
           'honest = mech.noise_plan(_declared_agent(d, 2, "none"), min_weight=c, separable=True, steps=1,',
           'honest = mech.noise_plan(_declared_agent(d, 0, "none"), min_weight=c, separable=True, steps=1,',
           "plan = mech.noise_plan(_declared_agent(d, 1, b), min_weight=1.0, separable=False, steps=1,")},
    **{("cvxdp/audits/release.py", line): "the public gradient is evaluated only at the step's start u = 0: with "
       "regularizer 0 it adds -0.0 (x + -0.0 == x), and reg / (0 - 1) == reg * (0 - 1)" for line in (
           "public_gradient=(lambda u: regularizer * (u - 1.0)) if regularizer > -1 else None))",
           "public_gradient=(lambda u: regularizer * (u - 1.0)) if regularizer >= 0 else None))",
           "public_gradient=(lambda u: regularizer / (u - 1.0)) if regularizer > 0 else None))")},
    **{("cvxdp/audits/release.py", f"msg = RoundMessage(round= {r}, bw=np.zeros(1), rho=r, eta=e, plan=plan, "
        "placement=mech.placement)"): "the round number labels errors and the Release only; the audit reads "
       "arrays['ez']" for r in (0, 2)},
    ("cvxdp/audits/release.py", "return np.array([float(np.clip(grads[index], not clip, clip).sum())])"):
        "the per-example gradients are 0 or +inf, never negative: a lower clip of 0 or -C is the same",
    **{("cvxdp/audits/release.py", line): "the last entry of a one-entry array (one released coordinate, one agent, "
       "one word) is its first" for line in (
           'out[k] = node.step(msg).arrays["ez"][ -1]',
           "transcript = np.stack([sent[ -1] for sent in backend.sent]).reshape(len(backend.sent), *shape)",
           "return [int(child.generate_state(1)[ -1]) for child in np.random.SeedSequence(seed).spawn(3)]")},
    ("cvxdp/audits/release.py", "return [int(child.generate_state( 2)[0]) for child in "
     "np.random.SeedSequence(seed).spawn(3)]"):
        "the first word of SeedSequence.generate_state(2) is generate_state(1)'s",
    ("cvxdp/audits/release.py", "for added, child in zip((False, True), np.random.SeedSequence(s).spawn( 3)):"):
        "the first two children of spawn(3) are spawn(2)'s, and zip stops after two",
    ("cvxdp/audits/release.py", "def call(self, method, args=None, /, round=None):  # type: ignore[no-untyped-def]"):
        "'*' became '/' in the signature: the one caller (cvxdp/run/loop.py) passes method and args by position and "
        "round by keyword",
    **{("cvxdp/audits/release.py", line): "which calls the recording backend keeps in declared: nothing reads it "
       "(the audit reads backend.sent)" for line in ("if not method is Node.declare:",
                                                      "if method is not Node.declare:")},
    ("cvxdp/audits/release.py", '"boundary_fraction": float(np.mean(np.abs(outputs[0]) > bound * (1 - 1e-12)))}'):
        "projected outputs are exactly +-bound, above bound (1 - 1e-12): > and >= differ only at an exact tie with "
        "bound (1 - 1e-12), which a continuous noise does not produce",
    ("cvxdp/audits/statistics.py", "bound = np.where(p_lo > dl, np.log(np.maximum(p_lo - dl, 1e-300) / q_hi), "
     "not math.inf)"):
        "a threshold whose lower bound is at most delta scores 0 instead of -inf: a best of 0 or below returns the "
        "same empty result (epsilon_lower 0, no threshold), and a positive best is the same either way",
    ("cvxdp/audits/statistics.py", "bound = np.where(p_lo > dl, np.log(np.maximum(p_lo - dl, -1.0) / q_hi), "
     "-math.inf)"):
        "the floor only guards the entries where p_lo <= delta, whose log np.where discards (-inf there either way; "
        "the errstate keeps the log of a negative number quiet)",
    ("cvxdp/audits/statistics.py", "bound = np.where(p_lo >= dl, np.log(np.maximum(p_lo - dl, 1e-300) / q_hi), "
     "-math.inf)"):
        "p_lo == delta gives log(1e-300 / p'_hi), below -690 instead of -inf: never the best of a positive bound, and a "
        "best of 0 or below returns the same empty result",
    ("cvxdp/audits/statistics.py", "if bound[i] >= best[0]:"):
        "an exact tie between two events' bounds: the later one is reported as the witness instead of the first, "
        "with the same epsilon_lower (either is a valid witness of it)",
    ("cvxdp/audits/statistics.py", "best = (not math.inf, None, {})"):
        "the search starts at 0 instead of -inf: only a positive bound replaces it either way, and a best of 0 or "
        "below returns the same empty result",
    ("cvxdp/audits/statistics.py", "if eps_lo < 0.0:"):
        "eps_lo is the largest log((p_lo - delta) / p'_hi): exactly 0 only when p_lo - delta equals p'_hi to the "
        "last bit, a tie the Clopper-Pearson quantiles of integer counts do not produce; below it both return 0",
}


def _squeeze(text: str) -> str:
    return "".join(text.split())  # Cosmic Ray writes a replaced number with a space before it


_EQUIVALENT = {(f, _squeeze(line)): reason for (f, line), reason in EQUIVALENT.items()}


def _mutated_line(diff: str | None) -> str:
    """The mutant's own line in a Cosmic Ray diff (its first added line; ``removed: LINE`` for a deletion)."""
    lines = (diff or "").splitlines()
    for line in lines:
        if line.startswith("+") and not line.startswith("+++"):
            return line[1:].strip()
    removed = [line[1:].strip() for line in lines if line.startswith("-") and not line.startswith("---")
               and line[1:].strip()]
    return f"removed: {removed[0]}" if removed else ""


# --------------------------------------------------------------------------- the test server
def _preload(scratch: Path, tests: tuple[str, ...]) -> list[str]:
    """The modules (never cvxdp's own) that collecting the row's tests loads (CVXPY, SciPy, pandapower, ...)."""
    code = ("import sys, pytest\n"
            f"pytest.main(['--co', '-q', '-n', '0', '-p', 'no:cacheprovider', *{list(tests)!r}])\n"
            "print('MODULES', ' '.join(sorted(m for m in sys.modules if not m.startswith(('cvxdp', 'tests', "
            "'__main__', 'conftest')))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=scratch, capture_output=True, text=True, check=True)
    line = next(x for x in out.stdout.splitlines() if x.startswith("MODULES "))
    return line.split()[1:]


def _definition_spans(path: Path) -> list[tuple[int, int, str]]:
    """(first line, last line, name) of every top-level function and class and every method of ``path``."""
    tree = ast.parse(path.read_text())
    spans = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            kind = "class " if isinstance(node, ast.ClassDef) else ""  # a class body runs at import
            spans.append((first, node.end_lineno, kind + node.name))
            if isinstance(node, ast.ClassDef):
                for sub in node.body:
                    if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        first = min([sub.lineno, *(d.lineno for d in sub.decorator_list)])
                        spans.append((first, sub.end_lineno, f"{node.name}.{sub.name}"))
    return spans


def _innermost(spans: list[tuple[int, int, str]], line: int) -> tuple[int, int, str] | None:
    """The function (a method before its class) that holds ``line``; None at module level or in a class body."""
    holding = [s for s in spans if s[0] <= line <= s[1]]
    functions = [s for s in holding if not s[2].startswith("class ")]
    return min(functions, key=lambda s: s[1] - s[0]) if functions else None


def _statement_spans(path: Path) -> list[tuple[int, int]]:
    """(first line, last line) of every statement of ``path`` (a compound statement: its header only, up to its
    body's first line; a decorated definition from its first decorator)."""
    spans = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.stmt):
            first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
            body = getattr(node, "body", None)
            last = body[0].lineno - 1 if isinstance(body, list) and body and body[0].lineno > node.lineno \
                else node.end_lineno
            spans.append((first, max(first, last)))
    return spans


def _statement(statements: list[tuple[int, int]], line: int, function: tuple[int, int, str]) -> tuple[int, int]:
    """The innermost statement holding ``line`` inside ``function`` (the function itself when none is smaller)."""
    holding = [s for s in statements if s[0] <= line <= s[1] and function[0] <= s[0] and s[1] <= function[1]]
    return min(holding, key=lambda s: s[1] - s[0]) if holding else (function[0], function[1])


class TestServer:
    """Forks one pytest child per request, in the scratch copy, with the dependencies imported once."""

    def __init__(self, scratch: Path, row: Row, log, rerun: bool = False) -> None:
        self.scratch, self.row, self.log, self.rerun = scratch, row, log, rerun
        self.pristine = {f: (scratch / f).read_text() for f in row.files}
        self.spans = {f: _definition_spans(scratch / f) for f in row.files}
        self.statements = {f: _statement_spans(scratch / f) for f in row.files}
        self.lines: dict[str, set[tuple[str, int]]] = {}  # test -> the (file, line)s it ran
        self.durations: dict[str, float] = {}
        self.where = "unmutated"

    # the parent never imports cvxdp: every child imports the module as it is on disk at that moment
    def preload(self) -> None:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        os.environ.setdefault("MPLBACKEND", "Agg")
        for name in _preload(self.scratch, self.row.tests):
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - a module that only imports inside its package is fine to skip
                pass
        stray = [m for m in sys.modules if m.startswith("cvxdp")]
        assert not stray, f"the test server must not import cvxdp ({stray[:3]})"

    def _pytest_args(self, tests: list[str]) -> list[str]:
        # the Ray backend's tests (marked ``ray``) run the same nodes in actors as the serial ones; in a forked child
        # each would start a Ray cluster of its own (minutes per mutant on a busy machine), so they are left out
        return ["-x", "-q", "-n", "0", "-p", "no:cacheprovider", "-p", "no:randomly", "--no-header", "--tb=no",
                "-W", "ignore", "-m", "not slow and not ray", *tests]

    def _fork(self, args: list[str], timeout: float, trace: str | None = None) -> int:
        pid = os.fork()
        if pid == 0:  # the child: a fresh cvxdp from the scratch copy
            code = 1
            try:
                os.chdir(self.scratch)
                sys.path.insert(0, str(self.scratch))
                sys.dont_write_bytecode = True
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                os.dup2(devnull, 2)
                import pytest

                plugins = [_Tracer(self.row.files, self.scratch, trace)] if trace else []
                code = int(pytest.main(args, plugins=plugins))
            finally:
                os._exit(code)
        deadline = time.monotonic() + timeout
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return 124  # timed out: killed
            time.sleep(0.02)

    def measure(self) -> None:
        """Run every test once, unmutated, recording which lines of the row's files each one runs."""
        trace = self.scratch / ".mutation-trace.json"
        code = self._fork(self._pytest_args(list(self.row.tests))[1:], timeout=3600, trace=str(trace))
        if code not in (0, 5):
            raise SystemExit(f"the row's tests fail unmutated (pytest exit {code}); fix them first")
        data = json.loads(trace.read_text())
        self.lines = {t: {tuple(x) for x in lines} for t, lines in data["lines"].items()}
        self.durations = data["durations"]

    def select(self) -> tuple[list[str], float] | None:
        """The tests to run against the mutant now on disk (None: the files are unmutated)."""
        for f in self.row.files:
            now = (self.scratch / f).read_text()
            if now == self.pristine[f]:
                continue
            old, new = self.pristine[f].splitlines(), now.splitlines()
            line = next((i + 1 for i, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
            span = _innermost(self.spans[f], line)
            self.where = f"{f}:{line}"
            first, last = _statement(self.statements[f], line, span) if span else (0, 0)
            if span is None or first == span[0]:
                # module level, a class body or a function's header (its decorators, defaults and signature), run
                # at import: anything may read it, and a test of a signature (an argument refused by position)
                # never enters the function, so no trace saw it
                tests = list(self.durations)
            else:  # the tests that ran a line of the statement that holds the mutation
                tests = [t for t, lines in self.lines.items()
                         if any((f, k) in lines for k in range(first, last + 1))]
            tests.sort(key=lambda t: self.durations.get(t, 0.0))
            return tests, sum(self.durations.get(t, 0.0) for t in tests)
        return None

    def serve(self, sock_path: Path) -> None:
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(sock_path))
        server.listen(1)
        while True:
            conn, _ = server.accept()
            with conn:
                if conn.recv(16) == b"stop":
                    return
                picked = self.select()
                if picked is None:  # the baseline: every test
                    tests, expected = list(self.durations) or list(self.row.tests), sum(self.durations.values())
                else:
                    tests, expected = picked
                start = time.monotonic()
                if not tests:
                    code = 0  # no test reaches the mutant: it survives
                else:
                    budget = (30.0 + 3.0 * expected) * max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
                    code = self._fork(self._pytest_args(tests), timeout=budget)
                    if code == 124:  # a loop that no longer ends, or a machine busy with other work: once more
                        self.log.write(f"{self.where} timed out after {budget:.0f} s: once more, four times as long\n")
                        code = self._fork(self._pytest_args(tests), timeout=4.0 * budget)
                    if code == 124 and self.rerun:  # a survivor that now runs out of time: not counted as killed
                        self.log.write("timed out: counted as surviving\n")
                        code = 0
                self.log.write(f"{self.where} {len(tests)} tests, exit {code}, {time.monotonic() - start:.1f} s\n")
                self.log.flush()
                conn.sendall(f"{code}\n".encode())


class _Tracer:
    """A pytest plugin that records, per test, the lines of the row's files that it runs (``sys.settrace``, local
    tracing in those files only)."""

    def __init__(self, files: tuple[str, ...], scratch: Path, out: str) -> None:
        self.files = {str((scratch / f).resolve()): f for f in files}
        self.out = out
        self.lines: dict[str, set[tuple[str, int]]] = {}
        self.durations: dict[str, float] = {}
        self.current: set[tuple[str, int]] | None = None

    def _trace(self, frame, event, arg):  # noqa: ANN001
        f = self.files.get(frame.f_code.co_filename)
        if f is None or self.current is None:
            return None
        current = self.current

        def local(frame, event, arg):  # noqa: ANN001
            if event == "line":
                current.add((f, frame.f_lineno))
            return local

        current.add((f, frame.f_lineno))
        return local

    def pytest_runtest_protocol(self, item, nextitem):  # noqa: ANN001
        import threading

        self.current = self.lines.setdefault(item.nodeid, set())
        sys.settrace(self._trace)
        threading.settrace(self._trace)

    def pytest_runtest_logreport(self, report):  # noqa: ANN001
        self.durations[report.nodeid] = self.durations.get(report.nodeid, 0.0) + report.duration
        if report.when == "teardown":
            sys.settrace(None)
            self.current = None

    def pytest_sessionfinish(self, session, exitstatus):  # noqa: ANN001
        Path(self.out).write_text(json.dumps({"lines": {t: sorted(c) for t, c in self.lines.items()},
                                              "durations": self.durations}))


# --------------------------------------------------------------------------- one row
def _scratch_copy(dest: Path) -> str:
    """The repository at HEAD (tracked files) in ``dest``; returns the commit."""
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.strip()
    archive = subprocess.run(["git", "archive", "--format=tar", "HEAD"], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return commit


def _annotation_spans(path: Path) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    spans = []
    for node in ast.walk(ast.parse(path.read_text())):
        found = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            found = [x.annotation for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg)
                     if x is not None and x.annotation is not None]
            found += [node.returns] if node.returns is not None else []
        elif isinstance(node, ast.AnnAssign):
            found = [node.annotation]
        spans += [((x.lineno, x.col_offset), (x.end_lineno, x.end_col_offset)) for x in found]
    return spans


def _skip(db_path: Path, scratch: Path, row: Row) -> dict[str, int]:
    """Mark as skipped the mutants in annotations, of excluded operators and outside the row's definitions."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    skipped = {"annotation": 0, "operator": 0, "outside": 0}
    annotations = {f: _annotation_spans(scratch / f) for f in row.files}
    spans = {f: _definition_spans(scratch / f) for f in row.files}
    with use_db(str(db_path), WorkDB.Mode.open) as db:
        for item in list(db.pending_work_items):
            m = item.mutations[0]
            f, start = str(m.module_path), tuple(m.start_pos)
            reason = None
            if any(a <= start < b for a, b in annotations[f]):
                reason = "annotation"
            elif not _kept(m.operator_name):
                reason = "operator"
            elif row.definitions:
                holding = [s for s in spans[f] if s[0] <= start[0] <= s[1]]
                if not any(s[2].removeprefix("class ").split(".")[0] in row.definitions for s in holding):
                    reason = "outside"
            if reason:
                skipped[reason] += 1
                db.set_result(item.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output=reason))
    return skipped


def _sources(scratch: Path, row: Row) -> dict[str, str]:
    return {f: hashlib.sha256((scratch / f).read_bytes()).hexdigest() for f in row.files}


def run_row(name: str, row: Row, out: Path, previous: dict | None = None, resume: bool = False) -> dict:
    """Mutation testing of one row; returns its summary. With ``previous`` (the row's last summary), only the last
    run's survivors run again, against the tests at HEAD (the module itself must be unchanged). With ``resume``, a
    session left unfinished continues (its mutants not yet run)."""
    from cosmic_ray.work_db import WorkDB, use_db

    out.mkdir(parents=True, exist_ok=True)
    slug = name.replace("/", "-")
    with tempfile.TemporaryDirectory(prefix=f"mutation-{slug}-") as tmp:
        scratch = Path(tmp)
        commit = _scratch_copy(scratch)
        sock, client = scratch / ".mutation.sock", scratch / ".mutation_client.py"
        client.write_text(CLIENT)
        config = scratch / "cosmic-ray.toml"
        files = ", ".join(json.dumps(f) for f in row.files)
        config.write_text(f'[cosmic-ray]\nmodule-path = [{files}]\ntimeout = 3600.0\nexcluded-modules = []\n'
                          f'test-command = "{sys.executable} -S {client} {sock}"\n'
                          '[cosmic-ray.distributor]\nname = "local"\n')
        db_path = out / f"{slug}.sqlite"
        started = time.time()
        if previous is None:
            work_db = db_path
            if not (resume and db_path.exists()):
                db_path.unlink(missing_ok=True)
                subprocess.run([COSMIC_RAY, "init", str(config), str(db_path)], cwd=scratch, check=True)
                _skip(db_path, scratch, row)
        else:
            before = previous.get("sources") or {  # a summary written before sources were recorded: its commit's
                f: hashlib.sha256(subprocess.run(["git", "show", f"{previous['commit']}:{f}"], cwd=ROOT,
                                                 capture_output=True, check=True).stdout).hexdigest()
                for f in row.files}
            if before != _sources(scratch, row):
                raise SystemExit(f"{name}: the module changed since its last run; run the row again in full")
            work_db = out / f"{slug}.rerun.sqlite"
            work_db.unlink(missing_ok=True)
            from cosmic_ray.work_item import TestOutcome

            with use_db(str(db_path), WorkDB.Mode.open) as db:
                again = [item for item, result in db.completed_work_items
                         if result.test_outcome == TestOutcome.SURVIVED]
            with use_db(str(work_db)) as db:
                db.add_work_items(again)
        server = TestServer(scratch, row, open(out / f"{slug}{'.rerun' if previous else ''}.log", "w"),
                            rerun=previous is not None)
        server.preload()
        server.measure()
        pid = os.fork()
        if pid == 0:
            try:
                server.serve(sock)
            finally:
                os._exit(0)
        try:
            while not sock.exists():
                time.sleep(0.05)
            subprocess.run([COSMIC_RAY, "exec", str(config), str(work_db)], cwd=scratch, check=True)
        finally:
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(str(sock))
                s.sendall(b"stop")
            os.waitpid(pid, 0)
        if previous is not None:  # the survivors' new results replace their old ones
            with use_db(str(work_db), WorkDB.Mode.open) as db:
                fresh = list(db.completed_work_items)
            with use_db(str(db_path), WorkDB.Mode.open) as db:
                for item, result in fresh:
                    db.set_result(item.job_id, result)
        with use_db(str(db_path), WorkDB.Mode.open) as db:
            results = list(db.completed_work_items)
        summary = _summarise(name, row, results, commit, time.time() - started, out / f"{slug}.survivors.md")
        summary["sources"] = _sources(scratch, row)
        if previous is not None:
            summary["first_run"] = previous.get("first_run", {k: previous[k] for k in
                                                              ("commit", "killed", "survived", "seconds")})
    return summary


def _summarise(name: str, row: Row, results: list, commit: str, seconds: float | None, survivors_path: Path,
               pending: int = 0) -> dict:
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    counts = {"mutants": len(results) + pending, "pending": pending, "skipped": 0, "killed": 0, "survived": 0,
              "equivalent": 0, "incompetent": 0}
    skipped_by: dict[str, int] = {}
    lines = [f"# Surviving mutants of {name} ({', '.join(row.files)}) at {commit[:7]}", ""]
    for item, result in sorted(results, key=lambda r: (str(r[0].mutations[0].module_path),
                                                       tuple(r[0].mutations[0].start_pos))):
        m = item.mutations[0]
        if result.worker_outcome == WorkerOutcome.SKIPPED:
            counts["skipped"] += 1
            skipped_by[result.output or "?"] = skipped_by.get(result.output or "?", 0) + 1
            continue
        if result.worker_outcome != WorkerOutcome.NORMAL or result.test_outcome == TestOutcome.INCOMPETENT:
            counts["incompetent"] += 1
            continue
        if result.test_outcome == TestOutcome.KILLED:
            counts["killed"] += 1
            continue
        reason = _EQUIVALENT.get((str(m.module_path), _squeeze(_mutated_line(result.diff))))
        counts["equivalent" if reason else "survived"] += 1
        lines += [f"## {m.module_path}:{m.start_pos[0]} {m.definition_name} {m.operator_name}"
                  + (f" (equivalent: {reason})" if reason else ""), "", "```diff", (result.diff or "").strip(), "```",
                  ""]
    scored = counts["killed"] + counts["survived"]
    summary = {"row": name, "files": list(row.files), "tests": list(row.tests), "commit": commit, **counts,
               "skipped_by": skipped_by, "score": counts["killed"] / scored if scored else None,
               "seconds": None if seconds is None else round(seconds), "load": os.getloadavg()[0]}
    survivors_path.write_text("\n".join(lines))
    return summary


def report_row(name: str, row: Row, out: Path, previous: dict | None) -> dict:
    """The summary of a row's session as it stands (also while it runs, or after it was stopped)."""
    from cosmic_ray.work_db import WorkDB, use_db

    slug = name.replace("/", "-")
    with use_db(str(out / f"{slug}.sqlite"), WorkDB.Mode.open) as db:
        results, total = list(db.completed_work_items), db.num_work_items
    commit = previous["commit"] if previous else subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    summary = _summarise(name, row, results, commit, previous.get("seconds") if previous else None,
                         out / f"{slug}.survivors.md", pending=total - len(results))
    for key in ("sources", "first_run"):
        if previous and key in previous:
            summary[key] = previous[key]
    return summary


def _write_summary(out: Path, summaries: dict[str, dict]) -> None:
    (out / "summary.json").write_text(json.dumps(summaries, indent=2))
    rows = ["| module | mutants | skipped | not run yet | killed | survived | equivalent | score |",
            "|---|---|---|---|---|---|---|---|"]
    keys = ("mutants", "skipped", "pending", "killed", "survived", "equivalent")
    totals = dict.fromkeys(keys, 0)
    for name, s in summaries.items():
        for k in totals:
            totals[k] += s.get(k, 0)
        score = "-" if s["score"] is None else f"{100 * s['score']:.1f} %"
        rows.append(f"| {name} | " + " | ".join(str(s.get(k, 0)) for k in keys) + f" | {score} |")
    scored = totals["killed"] + totals["survived"]
    rows.append("| all | " + " | ".join(str(totals[k]) for k in keys)
                + f" | {100 * totals['killed'] / max(scored, 1):.1f} % |")
    (out / "summary.md").write_text("\n".join(rows) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", nargs="*", help="rows of MODULES to run (default: all)")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "mutation")
    parser.add_argument("--list", action="store_true", help="print the rows and exit")
    parser.add_argument("--report", action="store_true",
                        help="summarise the rows' sessions as they stand (a run under way or stopped), run nothing")
    parser.add_argument("--resume", action="store_true",
                        help="continue the rows' unfinished sessions instead of starting them again")
    parser.add_argument("--survivors", action="store_true",
                        help="run only the last run's surviving mutants again, against the tests at HEAD")
    args = parser.parse_args(argv)
    if args.list:
        for name, row in MODULES.items():
            print(f"{name}: {', '.join(row.files)} <- {', '.join(row.tests)}"
                  + (f" (only {', '.join(row.definitions)})" if row.definitions else ""))
        return
    unknown = [r for r in args.rows if r not in MODULES]
    if unknown:
        raise SystemExit(f"Unknown row(s) {unknown}. Known: {', '.join(MODULES)}")
    if not Path(COSMIC_RAY).exists():
        raise SystemExit("Cosmic Ray is not installed beside this Python: pip install -e \".[mutation]\"")
    summary_file = args.out / "summary.json"
    summaries = json.loads(summary_file.read_text()) if summary_file.exists() else {}
    if args.report:
        for name in args.rows or [n for n in MODULES if (args.out / f"{n.replace('/', '-')}.sqlite").exists()]:
            summaries[name] = report_row(name, MODULES[name], args.out, summaries.get(name))
        _write_summary(args.out, summaries)
        print((args.out / "summary.md").read_text())
        return
    for name in args.rows or list(MODULES):
        if args.survivors and name not in summaries:
            raise SystemExit(f"{name} has no earlier run in {args.out}")
        summaries[name] = run_row(name, MODULES[name], args.out, summaries[name] if args.survivors else None,
                                  resume=args.resume)
        _write_summary(args.out, summaries)
        print(json.dumps(summaries[name]))


if __name__ == "__main__":
    main()
