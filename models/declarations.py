"""The bundled templates' declarations (:class:`cvxdp.Template`): what each ``cvxdp.templates`` entry point of
this package names (pyproject.toml). Cheap to import: the builders and settings hooks are
``"module:function"`` targets, imported only when a case is built, so ``cvxdp run --help`` and the case-file
reference read the ``[model]`` keys from here without loading a template (or CVXPY).
"""

from __future__ import annotations

from cvxdp import ModelKey, Template

__all__ = ["ERM", "LOGISTIC", "POWER", "TOY", "VERTICAL"]

POWER = Template(
    "power", "cvxdp_models.power.template:build", settings="cvxdp_models.power.template:settings",
    reads_data=False, metrics="cvxdp_models.power.metrics:METRICS", keys=(
        ModelKey("network", "str", "required",
                 "a pandapower case (case14, case118, case300, case1354pegase, ...), a bundled PGLib-OPF "
                 "v23.07 case (pglib_opf_case14_ieee, pglib_opf_case118_ieee, pglib_opf_case300_ieee) or a "
                 "MATPOWER case file (*.m, relative to the case file); its content is part of the run "
                 "fingerprint"),
        ModelKey("zones", "list of lists of int", "-",
                 "MATPOWER bus numbers per zone (exactly one of zones, auto_zones)"),
        ModelKey("auto_zones", "int >= 2", "-",
                 "number of connected zones of an automatic partition (it cuts the branches of least total "
                 "admittance)"),
        ModelKey("objective", "str", "balance",
                 "balance (sum of squared P/Q balance deviations, p.u.^2, paper eq. 28) | cost (generation "
                 "cost / cost_scale, k$/h)"),
        ModelKey("alpha", "float > 0", "0.1",
                 "alpha-adjacent loads: one bus's P and Q load differ by <= alpha p.u."),
        ModelKey("penalty", "float >= 0", "1 (balance); 0 (cost)",
                 "weight of the squared balance deviations; 0 with cost = exact balance (loads in the "
                 "constraints: no private run possible)"),
        ModelKey("cost_scale", "float > 0", "1000", "cost objective = generation cost ($/h) / cost_scale"),
        ModelKey("load_scale", "float > 0", "1", "multiplies every load"),
    ))

LOGISTIC = Template(
    "logistic", "cvxdp_models.logistic.template:build", settings="cvxdp_models.logistic.template:settings",
    metrics="cvxdp_models.logistic.metrics:METRICS", keys=(
        ModelKey("dataset", "str", "digits",
                 "digits | breast_cancer (bundled) | mnist | femnist | libsvm | adult (local files)"),
        ModelKey("path", "str", "-",
                 "data file or directory, relative to the case file (`--data DIR` sets it)"),
        ModelKey("test_path", "str", "-", "separate test file (libsvm, adult)"),
        ModelKey("agents", "int >= 1", "5 (femnist: all writers)",
                 "number of agents (femnist: first N writers)"),
        ModelKey("writers", "list of int >= 0", "none",
                 "femnist only: the writers by index in the shards' file order (e.g. [10, ..., 19], a held-"
                 "out set); exclusive with agents"),
        ModelKey("silos", "int >= 1 or list of lists", "none",
                 "cross-silo agents silo0, silo1, ...: femnist: the loaded writers in S contiguous groups "
                 "(or the listed writers of each silo); other data sets: S parts of split (= agents)"),
        ModelKey("split", "str", "iid (femnist: writer)", "iid | label_skew | dirichlet | writer"),
        ModelKey("dirichlet_alpha", "float > 0", "0.5", "concentration of the Dirichlet split"),
        ModelKey("classes_per_agent", "int >= 1", "2", "labels per agent (label_skew)"),
        ModelKey("test_fraction", "float in [0, 1)", "0.25", "held-out share when there is no test file"),
        ModelKey("max_samples", "int >= 2", "all", "random subset of the samples (not femnist)"),
        ModelKey("standardize", "str", "range for digits, else none",
                 "range ((x - 0.5) / 0.5, the public pixel range of digits, mnist, femnist) | public "
                 "(center, scale) | none | pooled (all agents' mean/sd: non-private only, a private run is "
                 "refused; true = pooled, false = none)"),
        ModelKey("center", "float or list", "-",
                 "standardize = public: the public centre (one float, or one per feature)"),
        ModelKey("scale", "float or list", "-",
                 "standardize = public: the public scale > 0 (one float, or one per feature)"),
        ModelKey("clip", "float > 0", "1.0",
                 "row-norm bound C (multiclass sensitivity sqrt(2) C / N under add/remove)"),
        ModelKey("total_samples", "int >= 1", "none",
                 "the public normaliser N of the loss (needed for relation = add_remove; absent: the "
                 "training set's own size under replace-one); must equal the loaded training set's size "
                 "(else a warning, and a private run is refused)"),
        ModelKey("relation", "str", "add_remove with total_samples, else replace",
                 "neighbouring relation: add_remove | replace (replace-one: twice the sensitivity)"),
        ModelKey("bound", "float > 0", "1.5", "box |theta_jk| <= bound (binary: 0 = no box)"),
        ModelKey("kind", "str", "multiclass", "multiclass (eq. 30, softmax) | binary (logistic + l2)"),
        ModelKey("reg", "float >= 0", "0 / 1e-3", "binary: l2 weight"),
        ModelKey("data_seed", "int >= 0", "0", "seed of split, subsample, test split"),
        ModelKey("baselines", "bool", "true", "add scikit-learn pooled / one-agent test errors"),
        ModelKey("dtype", "str", "float32 (binary: float64)",
                 "float32 | float64: precision of the agents' value and gradient (float32: about 2x faster "
                 "rounds, iterates within 1e-5 of float64's; gradient, noise and released vectors stay "
                 "float64)"),
    ))

ERM = Template(
    "erm", "cvxdp_models.erm:build", settings="cvxdp_models.erm:settings",
    keys=(
        ModelKey("dataset", "str", "breast_cancer", "breast_cancer | digits | adult"),
        ModelKey("path", "str", "-", "UCI adult.data, relative to the case file"),
        ModelKey("test_path", "str", "-", "UCI adult.test"),
        ModelKey("positive_digits", "list of int", "[5, 6, 7, 8, 9]", "digits labelled +1"),
        ModelKey("nodes", "int >= 2", "5", "number of graph nodes"),
        ModelKey("C", "float > 0", "50", "loss weight"),
        ModelKey("rho", "float > 0", "0.1", "regularisation rho of the ERM (each node carries rho/N)"),
        ModelKey("test_fraction", "float in [0, 1)", "0.2", "held-out share"),
        ModelKey("max_samples", "int", "all", "random subset before the split"),
        ModelKey("data_seed", "int >= 0", "0", "seed of subsample, test split and node split"),
    ))

VERTICAL = Template(
    "vertical", "cvxdp_models.vertical:build", settings="cvxdp_models.vertical:settings",
    keys=(
        ModelKey("dataset", "str", "breast_cancer", "breast_cancer | digits | libsvm"),
        ModelKey("path", "str", "-", "LIBSVM training file"),
        ModelKey("test_path", "str", "-", "LIBSVM test file"),
        ModelKey("n_features", "int", "from the file", "LIBSVM feature count"),
        ModelKey("blocks", "str or list", "auto",
                 "column split over parties: counts, [start, stop) ranges, or a name"),
        ModelKey("normalize", "str", "party", "party | sample | none"),
        ModelKey("bound", "float > 0", "100", "radius b of each party's ball ||x_m|| <= b"),
        ModelKey("test_fraction", "float in [0, 1)", "0.25", "held-out share"),
        ModelKey("max_samples", "int", "all", "random subset of the training samples"),
        ModelKey("digits_positive", "list of int", "[5, 6, 7, 8, 9]", "digits labelled +1"),
        ModelKey("data_seed", "int >= 0", "0", "seed of subsample and test split"),
        ModelKey("lam", "float > 0", "1e-3",
                 "regularisation of the references (keep equal to [algorithm] lam)"),
    ))

TOY = Template(
    "toy", "cvxdp_models.toy:build", settings="cvxdp_models.toy:settings", reads_data=False,
    keys=(
        ModelKey("agents", "int", "3", "number of agents"),
        ModelKey("dim", "int", "5", "shared dimension"),
        ModelKey("samples", "int", "20", "samples per agent"),
        ModelKey("seed", "int", "0", "data seed"),
        ModelKey("bound", "float", "1.0", "box bound"),
        ModelKey("radius", "float", "1.5", "SOC radius"),
    ))
