"""The documented schema of case and study files: every key the runners and templates read, in one place.

:data:`SCHEMA` maps an engine table (``"[algorithm]"``, ``"[run]"``, ``"[study] grid"``, ...) to its keys, each
with a type, a default and a meaning; :func:`tables` adds one ``"[model] NAME"`` table per installed template,
read from the keys the template declares (:class:`cvxdp.ModelKey`, in its :class:`cvxdp.Template`). They feed
the ``cvxdp run --help`` epilog and the documentation's case-file reference (``docs/case-files.md``, rendered
from :func:`schema_markdown` when the site is built); a test checks that they list exactly the keys the code
accepts (the engine's key sets in :mod:`cvxdp.config.build` and the studies, each template's key set), so a key
cannot be added without documenting it. The engine's tables are text; the templates' declarations are imported
only when :func:`tables` is called (their modules are cheap: no template is built or loaded).
"""

from __future__ import annotations

from ..templates import TemplatePackageError, model_keys, template_names

#: table -> [(key, type, default, meaning)]; the [study] tables are each kind's declared keys
#: (:meth:`cvxdp.studies.Study.schema_rows`, kept as text so --help loads nothing; tests/config/test_schema.py checks
#: they are equal)
SCHEMA: dict[str, list[tuple[str, str, str, str]]] = {
    "[case]": [
        ("template", "str", "required", "an installed template (`cvxdp_models`: power | logistic | erm | vertical | "
         "toy; any package can add one: docs/templates.md)"),
        ("name", "str", "file stem", "run and output names"),
        ("description", "str", '""', "one line shown by `cvxdp cases`"),
    ],
    # [algorithm] and [privacy]: generated from the declared parameters (cvxdp.families.algorithm_schema /
    # privacy_schema; tests/config/test_schema.py checks they are equal), kept as text so --help loads nothing
    "[algorithm]": [
        ('name', 'str', 'ladmm', 'ladmm | admm | madmm | dvp | radmm | mradmm | sharing'),
        ('rho', "'auto', a float in (0, inf) or a schedule", 'auto (ladmm, admm); 1.0 (sharing)', 'ladmm, admm, sharing: penalty rho^t; "auto" adapts it to the released residuals; a table {kind = constant|linear|geometric|step|residual_balancing|adaptive, ...} is a schedule'),
        ('rounds', 'an int in [1, inf]', '100', 'ladmm, admm, madmm, dvp, radmm, mradmm: maximum number of rounds T'),
        ('tol_primal', 'a float in (0, inf) or None', 'none', 'ladmm, admm, sharing: stop when the primal residual falls below it (with tol_dual)'),
        ('tol_dual', 'a float in (0, inf) or None', 'none', 'ladmm, admm, sharing: stop when the dual residual falls below it (with tol_primal)'),
        ('tol_mismatch', 'a float in (0, inf) or None', 'none', "ladmm, admm: stop when the copies' mismatch falls below it (PowerModelsADA's ADMM rule with tol t: 2 t)"),
        ('eta', "'auto', a float in (0, inf) or a schedule", 'auto (ladmm); 0.5 (madmm); 1.0 (radmm, mradmm)', 'ladmm, madmm, radmm, mradmm: proximal weight eta^t ("auto": per agent, its curvature bound L_p, 0.55 L_p for a quadratic objective in a non-private run; a private run needs the model\'s declared bound and doubles eta_p while the agent\'s released copies move only with the noise)'),
        ('local_updates', 'an int in [1, inf]', '1', 'ladmm: J local updates per round'),
        ('relaxation', "'auto' or a float in (0, 2)", 'auto', "admm: over-relaxation of each agent's target (1.0: plain ADMM; auto: 1.3 for 15 rounds, then 1.6)"),
        ('polish', 'a bool', 'True', 'admm: consensus polishing: each round every agent also solves its problem with its shared values fixed to the mean of the copies released in the round before; when all can, that is a feasible point whose copies agree (result.polished)'),
        ('graph', "a networkx.Graph or one of 'random', 'ring', 'grid', 'complete' or None", 'none', 'madmm, dvp, radmm, mradmm: random | ring | grid | complete (a case file may give the edges instead: edges = [["node0", "node1"], ...])'),
        ('graph_seed', 'an int in [0, inf]', '0', 'madmm, dvp, radmm, mradmm: seed of a random topology'),
        ('edge_prob', 'a float in (0, 1] or None', 'none', 'madmm, dvp, radmm, mradmm: edge probability of a random topology'),
        ('init_scale', 'a float in [0, inf)', '0.1', "madmm, dvp, radmm, mradmm: f_i(0) ~ N(0, init_scale^2 I) from the node's generator"),
        ('local_solver', "one of 'auto', 'newton', 'lbfgs', 'cvxpy'", 'auto', 'madmm, dvp, radmm, mradmm: the exact primal update: auto | newton | lbfgs | cvxpy'),
        ('tol', 'a float in (0, inf) or None', 'none', 'madmm, dvp, radmm, mradmm: stop when, after an exact iteration, every node moved by at most tol and is within tol of the network mean'),
        ('q', 'a float in [1, inf), a list of them (one per node) or a {node: value} mapping', '1.0', 'madmm, mradmm: penalty growth eta_i(t) = eta_i(1) q_i^(t-1)'),
        ('theta', 'a float in (0, inf), a list of them (one per node) or a {node: value} mapping', '0.5', 'madmm, dvp: dual step'),
        ('theta_growth', 'a float in [1, inf)', '1.0', 'madmm: growth of theta'),
        ('gamma', 'a float in [0, inf)', '0.5', 'radmm, mradmm: the extra proximal weight of the recycled (even) step'),
        ('lam', 'a float in [0, inf)', '0.001', 'sharing: l2 regularisation weight lambda'),
        ('epochs', 'an int in [1, inf]', '50', "sharing: epochs T (the CLI's --rounds)"),
        ('loss', "one of 'logistic', 'squared'", 'logistic', "sharing: the centre's loss: logistic | squared"),
        ('record_messages', 'a bool', 'False', 'sharing: keep every message of the run in result.messages'),
        ('edges', 'list of [str, str]', 'none', "madmm, dvp, radmm, mradmm: the graph's edges themselves (instead of graph)"),
    ],
    "[privacy]": [
        ('mechanism', 'str', 'none', 'none | ObjL | ObjG | OutL | OutG | gamma (each algorithm accepts its own: cvxdp run --help)'),
        ('epsilon', 'a float in (0, inf)', 'required', "ObjL/ObjG, OutL/OutG: per local update (or each agent's whole run with calibrate = total)"),
        ('delta', 'a float in (0, 1) or None', 'none', 'ObjL/ObjG, OutL/OutG: Gaussian: required, per local update (or the whole run); Laplace: optional, the total delta of an rdp calibration'),
        ('calibration', "one of 'analytic', 'classic'", 'analytic', 'ObjL/ObjG, OutL/OutG: Gaussian formula: analytic (any epsilon) | classic (epsilon < 1)'),
        ('sensitivity', "one of 'exact', 'paper'", 'exact', "ObjL/ObjG, OutL/OutG: exact (the model's declared sensitivity) | paper (Ryu & Kim's preset: not a guarantee, flagged in the ledger)"),
        ('calibrate', "one of 'step', 'total'", 'step', 'ObjL/ObjG, OutL/OutG: step: epsilon/delta per local update | total: per agent over the run'),
        ('noise_source', "one of 'numpy', 'opendp'", 'numpy', 'ObjL/ObjG, OutL/OutG: numpy (seeded, research-grade) | opendp (hardened, not seedable)'),
        ('sampling_rate', 'a float in (0, 1) or None', 'none', 'ObjL/ObjG, OutL/OutG: Gaussian with calibrate = total: Poisson subsampling rate q of each local gradient (clipped per example to clip_norm), amplification by sampling in the ledger'),
        ('clip_norm', 'a float in (0, inf) or None', 'none', 'ObjL/ObjG, OutL/OutG: with sampling_rate: the per-example l2 gradient clip C'),
        ('alpha', 'a float in (0, inf), a list of them (one per node) or a {node: value} mapping', '1.0', 'gamma: Gamma-norm noise rate alpha_i(1) (larger: less noise, E||eps|| = d/alpha)'),
        ('growth', 'a float in (0, inf)', '1.0', 'gamma: alpha_i(t) = alpha_i(1) growth^(t-1)'),
    ],
    "[run]": [
        ("seed", "int >= 0", "none (fresh secret OS entropy)", "seed of the noise and the initial points; set only "
         "for reproducible research (replayable noise)"),
        ("accountant", "str", "pld", "basic | rdp | pld: the one tracked per round and used by the budget"),
        ("backend", "str", "serial", "serial | ray (Ray actors; `pip install 'cvxdp[ray]'`; same seed, same "
         "numbers)"),
        ("ray_cpus", "int >= 1", "all CPUs", "backend = ray: CPUs of the local Ray instance it starts"),
        ("ray_address", "str", "none (local Ray)", "backend = ray: address of an existing Ray cluster to join"),
        ("ray_min_variables", "int >= 0", "1000 (CVXDP_RAY_MIN_VARIABLES)", "backend = ray: below this many "
         "variables in all (public shapes) the run stays serial and says why; 0 always uses Ray"),
        ("budget_epsilon", "float > 0", "none", "stop before a round that would exceed this total epsilon"),
        ("budget_delta", "float >= 0", "0", "the delta of that stopping budget"),
        ("target_delta", "float in (0, 1)", "derived", "delta at which RDP/PLD totals are reported"),
    ],
    "[study] grid (default kind)": [
        ("case", "str", "required", "case file, relative to the study file"),
        ("name", "str", "file stem", "study name (titles, report)"),
        ("description", "str", '""', "one line shown by `cvxdp cases`"),
        ("mechanisms", "list of str", "[ObjL, ObjG, OutL, OutG]", "mechanisms compared"),
        ("epsilons", "list of float > 0", "required", "per-step epsilon grid"),
        ("local_updates", "list of int >= 1", "[1]", "J values"),
        ("seeds", "list of int >= 0", "[0]", "seeds per cell"),
        ("rounds", "int >= 1", "the case's", "rounds of every run (`--rounds` overrides)"),
        ("delta", "float in (0, 1)", "the case's or 1e-6", "per-step delta of the Gaussian mechanisms"),
        ("baseline", "bool", "true", "add the non-private run for each J"),
        ("total", "str", "none", "an equal-total study file (kind = total) run first into DIR/total; the report "
         "leads with it"),
    ],
    "[study] total (kind = total)": [
        ("kind", "str", "required", "total"),
        ("case", "str", "required", "case file, relative to the study file"),
        ("name", "str", "file stem", "study name (titles, report)"),
        ("description", "str", '""', "one line shown by `cvxdp cases`"),
        ("epsilons", "list of float > 0", "[0.5, 1, 4]", "each agent's whole-run epsilon"),
        ("delta", "float in (0, 1)", "1e-5", "each agent's whole-run delta"),
        ("mechanisms", "list of str or table", "[ObjG, OutG]", "per-round mechanisms, calibrate = total (PLD); a "
         "table { name, mechanism, privacy = { ... } } is a variant with its own [privacy] entries (e.g. "
         "sampling_rate, clip_norm)"),
        ("anchors", "list of str", "[InL, InG]", "one-shot baselines: InL / InG (input perturbation + exact ADMM, "
         "templates with the hook) or ObjL/ObjG/OutL/OutG-once (one release of the mechanism: T = 1, noise drawn "
         "once with J = 1, on every record), central (a centralized private model on the pooled data at the same "
         "budget: the logistic template's DP-SGD; what distribution costs), central-sqrtP (the same with sqrt(P) x "
         "its noise: what P parties' independent noises cost) or optimum (the non-private pooled optimum: what "
         "privacy costs)"),
        ("one_shot_local_updates", "int >= 1", "1", "J of the -once anchors (J > 1: J noisy local updates, composed)"),
        ("datasets", "list of tables", "none", "{ name, model = { ... } }: every cell runs on each data set "
         "([model] entries replaced; writers replaces agents); a winner is stated only when it wins on every one"),
        ("seeds", "list of int >= 0", "[0, 1, 2]", "seeds per cell (mean +- standard error)"),
        ("schedule", "list of [float, int, int]", "[[inf, 100, 1]]", "public rule: [max_epsilon, rounds, "
         "local_updates] rows; an epsilon takes the first row with max_epsilon >= it"),
        ("anchor_rounds", "int >= 1", "100", "rounds of InL/InG and of the non-private line (exact ADMM for power, "
         "else the case's algorithm without noise)"),
        ("baseline", "bool", "true", "add the non-private exact-ADMM run"),
    ],
    "[study] graph (kind = graph)": [
        ("kind", "str", "required", "graph"),
        ("case", "str", "required", "case file, relative to the study file"),
        ("name", "str", "file stem", "study name (titles, report)"),
        ("description", "str", '""', "one line shown by `cvxdp cases`"),
        ("runs", "int >= 1", "10", "repetitions per setting"),
        ("rounds", "int >= 1", "the case's", "iterations"),
        ("metric", "str", "average_loss", "metric plotted and compared"),
        ("bar_every", "int >= 1", "auto", "spacing of the error bars"),
    ],
    "[[setting]] (graph studies)": [
        ("label", "str", "required", "legend label"),
        ("panel", "str or list", "main", "figure panel(s) the setting appears in"),
        ("algorithm", "table", "required", "[algorithm] overrides"),
        ("privacy", "table", "none", "[privacy] overrides"),
        ("runs", "int >= 1", "the study's", "repetitions"),
        ("match_bound", "str", "-", "label of a setting whose privacy bound this one matches"),
    ],
    "[[comparison]] (graph studies)": [
        ("better", "str", "required", "label expected to be better"),
        ("than", "str", "required", "label compared with"),
        ("claim", "str", "-", "the paper's claim, quoted in the report"),
    ],
    "[study] sharing (kind = sharing)": [
        ("kind", "str", "required", "sharing"),
        ("case", "str", "required", "case file, relative to the study file"),
        ("name", "str", "file stem", "study name (titles, report)"),
        ("description", "str", '""', "one line shown by `cvxdp cases`"),
        ("noise_levels", "list of float >= 0", "required", "sigma values of the noise (0 = non-private)"),
        ("seeds", "list of int", "[0]", "seeds"),
        ("epochs", "int >= 1", "the case's", "epochs (`--rounds` overrides)"),
        ("delta", "float in (0, 1)", "1e-5", "delta at which each sigma's epsilon is reported"),
        ("rho_n", "float > 0", "-", "rho * N_train (rho then scales with the data)"),
        ("settle_tol", "float > 0", "0.02", "relative change that counts as settled"),
        ("gap_tol", "float > 0", "1e-3", "relative gap to the optimum that counts as converged"),
        ("accountant", "str", "pld", "accountant of the reported totals"),
    ],
}


#: the engine tables the templates' [model] tables follow (the reference's order: case, engine, model, studies)
_MODEL_AFTER = "[run]"


def model_tables() -> dict[str, list[tuple[str, str, str, str]]]:
    """One ``"[model] NAME"`` table per installed template that declares its keys, from its declaration."""
    out = {}
    for name in template_names():
        declared = model_keys(name)
        if declared is not None:
            out[f"[model] {name}"] = [(k.name, k.type, k.default, k.doc) for k in declared]
    return out


def tables() -> dict[str, list[tuple[str, str, str, str]]]:
    """Every documented table: :data:`SCHEMA`'s, with the templates' ``[model]`` tables after ``[run]``."""
    out: dict[str, list[tuple[str, str, str, str]]] = {}
    for table, rows in SCHEMA.items():
        out[table] = rows
        if table == _MODEL_AFTER:
            out.update(model_tables())
    return out


def keys(table: str) -> set[str]:
    """The documented keys of ``table`` (a key of :func:`tables`)."""
    return {row[0] for row in tables()[table]}


def _cell(text: str) -> str:
    """A table cell: a ``|`` inside it (``a | b`` alternatives, norms) is escaped so it does not split the row."""
    return text.replace("|", "\\|")


def schema_markdown() -> str:
    """The schema as markdown tables (the documentation's case-file reference, ``docs/case-files.md``)."""
    out = []
    for table, rows in tables().items():
        out += [f"**{table}**", "", "| key | type | default | meaning |", "|---|---|---|---|"]
        out += [f"| `{k}` | {_cell(t)} | {_cell(d)} | {_cell(m)} |" for k, t, d, m in rows]
        out.append("")
    return "\n".join(out)


def schema_epilog() -> str:
    """A compact plain-text listing for ``cvxdp run --help`` (click keeps ``\\b`` paragraphs as written)."""
    lines = ["\b", "Case file keys (full table with types, defaults and meanings: docs/case-files.md):"]
    try:
        documented = tables()
    except TemplatePackageError as exc:  # a broken template package: --help still answers, and says what is broken
        documented = dict(SCHEMA)
        lines.append(f"  (the templates' [model] keys are missing: {exc})")
    for table, rows in documented.items():
        if table.startswith(("[study]", "[[")):
            continue
        lines.append(f"  {table}: " + ", ".join(f"{k}={d}" for k, _, d, _ in rows))
    return "\n".join(lines)


def study_epilog() -> str:
    """A compact plain-text listing of the study files' keys for ``cvxdp study --help``: the rows of each kind's
    declared ``[study]`` keys (:meth:`cvxdp.studies.Study.schema_rows`; a test checks they are these)."""
    lines = ["\b", "Study file keys per [study] kind (full table: docs/case-files.md):"]
    for table, rows in SCHEMA.items():
        if table.startswith(("[study]", "[[")):
            lines.append(f"  {table}: " + ", ".join(f"{k}={d}" for k, _, d, _ in rows))
    return "\n".join(lines)
