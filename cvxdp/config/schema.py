"""The documented schema of case and study files: every key the runners and templates read, in one place.

:data:`SCHEMA` maps a table (``"[algorithm]"``, ``"[model] power"``, ``"[study] grid"``, ...) to its keys, each
with a type, a default and a meaning. It feeds the ``cvxdp run --help`` epilog and the README's "Case and study
files" section; a test checks that it lists exactly the keys the code accepts (the engine's key sets in
:mod:`cvxdp.config.build` and the studies, each template's key set), so a key cannot be added without documenting it.
This module is text only: it imports no template.
"""

from __future__ import annotations

#: table -> [(key, type, default, meaning)]
SCHEMA: dict[str, list[tuple[str, str, str, str]]] = {
    "[case]": [
        ("template", "str", "required", "power | logistic | erm | vertical | toy"),
        ("name", "str", "file stem", "run and output names"),
        ("description", "str", '""', "one line shown by `cvxdp cases`"),
    ],
    "[algorithm]": [
        ("name", "str", "ladmm", "ladmm | admm | sharing | madmm | dvp | radmm | mradmm"),
        ("rho", "\"auto\", float or schedule table", "\"auto\" (ladmm, admm); 1.0 (sharing)",
         "penalty rho^t (ladmm, admm, sharing); \"auto\" adapts it to the released residuals; a table "
         "{kind = constant|linear|geometric|step|residual_balancing|adaptive, ...} is a schedule"),
        ("eta", "\"auto\", float, list or schedule table", "\"auto\" (ladmm); 0.5 / 1.0 (graph)",
         "ladmm: proximal weight eta^t (\"auto\": per agent, its curvature bound L_p, 0.55 L_p for a quadratic "
         "objective in a non-private run; a private run needs the model's declared bound and doubles eta_p while "
         "the agent's released copies move only with the noise); madmm/radmm/mradmm: "
         "each node's penalty eta_i(1)"),
        ("local_updates", "int >= 1", "1", "J local updates per round (ladmm)"),
        ("rounds", "int >= 1", "100", "rounds T (sharing: epochs)"),
        ("relaxation", "\"auto\" or float in (0, 2)", "auto", "admm: over-relaxation of each agent's target (1.0: plain ADMM; auto: 1.3 for 15 rounds, then 1.6)"),
        ("polish", "bool", "true", "admm: consensus polishing -- each round every agent also solves its problem with "
         "its shared values fixed to the mean of the copies released in the round before; when all can, that is a "
         "feasible point whose copies agree (result.polished, history columns polished / polished_objective)"),
        ("tol_primal", "float > 0", "none", "stop when the primal residual falls below it (with tol_dual)"),
        ("tol_dual", "float > 0", "none", "stop when the dual residual falls below it (with tol_primal)"),
        ("tol_mismatch", "float > 0", "none", "ladmm/admm: stop when the copies' mismatch falls below it "
         "(PowerModelsADA's ADMM rule with tol t: 2 t)"),
        ("lam", "float > 0", "1e-3", "sharing: l2 regularisation weight lambda"),
        ("epochs", "int >= 1", "50", "sharing: epochs"),
        ("loss", "str", "logistic", "sharing: loss of the label party"),
        ("graph", "str", "random", "graph algorithms: random | ring | grid | complete"),
        ("edges", "list of [str, str]", "none", "graph algorithms: the edges themselves"),
        ("graph_seed", "int", "0", "graph algorithms: seed of a random topology"),
        ("edge_prob", "float in (0, 1]", "none", "graph algorithms: edge probability of a random graph"),
        ("init_scale", "float >= 0", "0.1", "graph algorithms: scale of the initial points"),
        ("local_solver", "str", "auto", "graph algorithms: auto | newton | lbfgs | cvxpy"),
        ("tol", "float > 0", "none", "graph algorithms: stopping tolerance"),
        ("q", "float or list >= 1", "1.0", "madmm/mradmm: penalty growth eta_i(t) = eta_i(1) q_i^(t-1)"),
        ("theta", "float or list > 0", "0.5", "madmm/dvp: dual step"),
        ("theta_growth", "float >= 1", "1.0", "madmm: growth of theta"),
        ("gamma", "float > 0", "0.5", "radmm/mradmm: step of the recycled (even) iterations"),
    ],
    "[privacy]": [
        ("mechanism", "str", "none", "none | ObjL | ObjG | OutL | OutG | gamma (graph algorithms); "
         "sharing takes none | OutG"),
        ("epsilon", "float > 0", "required if private", "per local update (or the whole run with "
         "calibrate = total)"),
        ("delta", "float in (0, 1)", "required for Gaussian", "per local update (or the whole run)"),
        ("calibration", "str", "analytic", "Gaussian formula: analytic (any epsilon) | "
         "classic (epsilon < 1)"),
        ("sensitivity", "str", "exact (sharing: worst_case)", "exact (the model's declared sensitivity) | paper "
         "(Ryu & Kim's or Hu et al.'s preset: not a guarantee, flagged in the ledger) | worst_case (sharing)"),
        ("calibrate", "str", "step", "step: epsilon/delta per local update | total: per agent over the run"),
        ("budget", "str", "step", "deprecated alias of calibrate"),
        ("noise_source", "str", "numpy", "numpy (seeded, research-grade) | opendp (hardened, not seedable)"),
        ("alpha", "float, list or table > 0", "1.0", "gamma: Gamma-norm noise rate alpha_i(1)"),
        ("growth", "float >= 1", "1.0", "gamma: alpha_i(t) = alpha_i(1) growth^(t-1)"),
    ],
    "[run]": [
        ("seed", "int >= 0", "none (fresh secret OS entropy)", "seed of the noise and the initial points; set only "
         "for reproducible research (replayable noise)"),
        ("accountant", "str", "pld", "basic | rdp | pld: the one tracked per round and used by the budget"),
        ("backend", "str", "serial", "serial | ray (Ray actors; `pip install 'cvxdp[ray]'`; same seed, same "
         "numbers)"),
        ("ray_cpus", "int >= 1", "all CPUs", "backend = ray: CPUs of the local Ray instance it starts"),
        ("ray_address", "str", "none (local Ray)", "backend = ray: address of an existing Ray cluster to join"),
        ("budget_epsilon", "float > 0", "none", "stop before a round that would exceed this total epsilon"),
        ("budget_delta", "float >= 0", "0", "the delta of that stopping budget"),
        ("target_delta", "float in (0, 1)", "derived", "delta at which RDP/PLD totals are reported"),
    ],
    "[model] power": [
        ("network", "str", "required",
         "a pandapower case (case14, case118, case300, case1354pegase, ...), a bundled PGLib-OPF v23.07 case "
         "(pglib_opf_case14_ieee, pglib_opf_case118_ieee, pglib_opf_case300_ieee) or a MATPOWER case file "
         "(*.m, relative to the case file); its content is part of the run fingerprint"),
        ("zones", "list of lists of int", "-", "MATPOWER bus numbers per zone (exactly one of zones, "
         "auto_zones)"),
        ("auto_zones", "int >= 2", "-",
         "number of connected zones of an automatic partition (it cuts the branches of least total admittance)"),
        ("objective", "str", "balance", "balance (sum of squared P/Q balance deviations, p.u.^2, paper eq. "
         "28) | cost (generation cost / cost_scale, k$/h)"),
        ("alpha", "float > 0", "0.1", "alpha-adjacent loads: one bus's P and Q load differ by <= alpha p.u."),
        ("penalty", "float >= 0", "1 (balance); 0 (cost)", "weight of the squared balance deviations; 0 "
         "with cost = exact balance (loads in the constraints: no private run possible)"),
        ("cost_scale", "float > 0", "1000", "cost objective = generation cost ($/h) / cost_scale"),
        ("load_scale", "float > 0", "1", "multiplies every load"),
    ],
    "[model] logistic": [
        ("dataset", "str", "digits", "digits | breast_cancer (bundled) | mnist | femnist | libsvm | adult "
         "(local files)"),
        ("path", "str", "-", "data file or directory, relative to the case file (`--data DIR` sets it)"),
        ("test_path", "str", "-", "separate test file (libsvm, adult)"),
        ("agents", "int >= 1", "5 (femnist: all writers)", "number of agents (femnist: first N writers)"),
        ("split", "str", "iid (femnist: writer)", "iid | label_skew | dirichlet | writer"),
        ("dirichlet_alpha", "float > 0", "0.5", "concentration of the Dirichlet split"),
        ("classes_per_agent", "int >= 1", "2", "labels per agent (label_skew)"),
        ("test_fraction", "float in [0, 1)", "0.25", "held-out share when there is no test file"),
        ("max_samples", "int >= 2", "all", "random subset of the samples (not femnist)"),
        ("standardize", "str", "range for digits, else none", "range ((x - 0.5) / 0.5, the public pixel range "
         "of digits, mnist, femnist) | public (center, scale) | none | pooled (all agents' mean/sd: non-private "
         "only, a private run is refused; true = pooled, false = none)"),
        ("center", "float or list", "-", "standardize = public: the public centre (one float, or one per feature)"),
        ("scale", "float or list", "-", "standardize = public: the public scale > 0 (one float, or one per feature)"),
        ("clip", "float > 0", "1.0", "row-norm bound C (multiclass sensitivity sqrt(2) C / N under add/remove)"),
        ("total_samples", "int >= 1", "none", "the public normaliser N of the loss (needed for relation = "
         "add_remove; absent: the training set's own size under replace-one); must equal the loaded training "
         "set's size (else a warning, and a private run is refused)"),
        ("relation", "str", "add_remove with total_samples, else replace", "neighbouring relation: add_remove | "
         "replace (replace-one: twice the sensitivity)"),
        ("bound", "float > 0", "1.5", "box |theta_jk| <= bound (binary: 0 = no box)"),
        ("kind", "str", "multiclass", "multiclass (eq. 30, softmax) | binary (logistic + l2)"),
        ("reg", "float >= 0", "0 / 1e-3", "binary: l2 weight"),
        ("data_seed", "int >= 0", "0", "seed of split, subsample, test split"),
        ("baselines", "bool", "true", "add scikit-learn pooled / one-agent test errors"),
        ("dtype", "str", "float32 (binary: float64)", "float32 | float64: precision of the agents' value and "
         "gradient (float32: about 2x faster rounds, iterates within 1e-5 of float64's; gradient, noise and "
         "released vectors stay float64)"),
    ],
    "[model] erm": [
        ("dataset", "str", "breast_cancer", "breast_cancer | digits | adult"),
        ("path", "str", "-", "UCI adult.data, relative to the case file"),
        ("test_path", "str", "-", "UCI adult.test"),
        ("positive_digits", "list of int", "[5, 6, 7, 8, 9]", "digits labelled +1"),
        ("nodes", "int >= 2", "5", "number of graph nodes"),
        ("C", "float > 0", "50", "loss weight"),
        ("rho", "float > 0", "0.1", "regularisation rho of the ERM (each node carries rho/N)"),
        ("test_fraction", "float in [0, 1)", "0.2", "held-out share"),
        ("max_samples", "int", "all", "random subset before the split"),
        ("data_seed", "int >= 0", "0", "seed of subsample, test split and node split"),
    ],
    "[model] vertical": [
        ("dataset", "str", "breast_cancer", "breast_cancer | digits | libsvm"),
        ("path", "str", "-", "LIBSVM training file"),
        ("test_path", "str", "-", "LIBSVM test file"),
        ("n_features", "int", "from the file", "LIBSVM feature count"),
        ("blocks", "str or list", "auto", "column split over parties: counts, [start, stop) ranges, or a name"),
        ("normalize", "str", "party", "party | sample | none"),
        ("bound", "float > 0", "100", "radius b of each party's ball ||x_m|| <= b"),
        ("test_fraction", "float in [0, 1)", "0.25", "held-out share"),
        ("max_samples", "int", "all", "random subset of the training samples"),
        ("digits_positive", "list of int", "[5, 6, 7, 8, 9]", "digits labelled +1"),
        ("data_seed", "int >= 0", "0", "seed of subsample and test split"),
        ("lam", "float > 0", "1e-3", "regularisation of the references (keep equal to [algorithm] lam)"),
    ],
    "[model] toy": [
        ("agents", "int", "3", "number of agents"),
        ("dim", "int", "5", "shared dimension"),
        ("samples", "int", "20", "samples per agent"),
        ("seed", "int", "0", "data seed"),
        ("bound", "float", "1.0", "box bound"),
        ("radius", "float", "1.5", "SOC radius"),
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
    ],
    "[study] graph (kind = graph)": [
        ("kind", "str", "required", "graph"),
        ("case", "str", "required", "case file"),
        ("name", "str", "file stem", "study name"),
        ("description", "str", '""', "one line"),
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
        ("case", "str", "required", "case file"),
        ("name", "str", "file stem", "study name"),
        ("description", "str", '""', "one line"),
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


def keys(table: str) -> set[str]:
    """The documented keys of ``table`` (a key of :data:`SCHEMA`)."""
    return {row[0] for row in SCHEMA[table]}


def schema_markdown() -> str:
    """The schema as markdown tables (the README's "Case and study files" section)."""
    out = []
    for table, rows in SCHEMA.items():
        out += [f"**{table}**", "", "| key | type | default | meaning |", "|---|---|---|---|"]
        out += [f"| `{k}` | {t} | {d} | {m} |" for k, t, d, m in rows]
        out.append("")
    return "\n".join(out)


def schema_epilog() -> str:
    """A compact plain-text listing for ``cvxdp run --help`` (click keeps ``\\b`` paragraphs as written)."""
    lines = ["\b", "Case file keys (full table with types, defaults and meanings: README, 'Case and study files'):"]
    for table, rows in SCHEMA.items():
        if table.startswith(("[study]", "[[")):
            continue
        lines.append(f"  {table}: " + ", ".join(f"{k}={d}" for k, _, d, _ in rows))
    return "\n".join(lines)
