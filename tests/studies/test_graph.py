"""The graph study (cvxdp.studies.graph): its runs' warnings come once each, after its progress bar."""

from __future__ import annotations

import warnings
from pathlib import Path

import cvxdp.studies.graph as graph_study

CASES = Path(__file__).resolve().parents[2] / "cases"


def test_a_graph_study_reports_its_warnings_once_each_at_the_end(tmp_path, monkeypatch):
    """Issue 38: every run's warnings went into the progress bar. A warning each run raises with its own numbers
    comes once, with the number of runs that raised it."""
    original = graph_study.run_case
    seen = []

    def warning_run(case, **kwargs):
        seen.append(case)
        warnings.warn(f"the run of seed {len(seen)} stopped 0.{len(seen)} away", UserWarning, stacklevel=2)
        return original(case, **kwargs)

    monkeypatch.setattr(graph_study, "run_case", warning_run)
    study = tmp_path / "s.toml"
    study.write_text(f"""[study]
kind = "graph"
case = "{(CASES / 'erm_madmm.toml').as_posix()}"
runs = 3
rounds = 2
[[setting]]
label = "PP"
algorithm = {{ name = "madmm", eta = 0.5, theta = 0.5 }}
privacy = {{ mechanism = "gamma", alpha = 3.0 }}
""")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        info = graph_study.run_graph_study(study, tmp_path / "o", progress=False)
    assert info["computed"] == 3 and len(seen) == 3
    ours = [str(w.message) for w in caught if "stopped" in str(w.message)]
    assert ours == ["the run of seed 1 stopped 0.1 away [3 run(s) of this study (the first; the numbers differ "
                    "between runs)]"]
