"""Quickstart: three agents fit a shared parameter privately, each under its own constraints.

    python examples/quickstart.py
"""

import cvxpy as cp
import numpy as np

import cvxdp

rng = np.random.default_rng(0)
truth = np.array([0.8, -0.3, 0.5])
agents = []
for p in range(3):
    A = rng.normal(size=(30, 3))
    A /= np.maximum(np.linalg.norm(A, axis=1, keepdims=True), 1.0)  # rows with ||a|| <= 1
    b = A @ truth + 0.05 * rng.normal(size=30)
    data_A = cp.Parameter((30, 3), value=A)  # private data are CVXPY Parameters
    data_b = cp.Parameter(30, value=b)
    x = cp.Variable(3)
    constraints = [x <= 1, x >= -1] if p != 1 else [cp.norm(x, 2) <= 0.9]  # each agent's own feasible set
    agents.append(cvxdp.Agent(
        f"hospital{p}",
        objective=cp.sum_squares(data_A @ x - data_b) / 60,
        constraints=constraints,
        shared={"x": x},
        gradient=lambda u, A=A, b=b: A.T @ (A @ u - b) / 30,
        lipschitz=1.0,  # public: rows with ||a|| <= 1 bound the Hessian A^T A / 30 by 1 (eta="auto" reads it)
        # replacing one target b_i by a value within 1 moves the gradient by at most |a_i| / 30 <= 1/30
        sensitivity=cvxdp.Sensitivity(l1=np.sqrt(3) / 30, l2=1 / 30, relation="replace one b_i within 1"),
    ))

reference = cvxdp.solve_central(agents)
algorithm = cvxdp.LinearizedADMM(local_updates=3, rounds=60)  # rho and eta: automatic
for privacy in (None, cvxdp.ObjectivePerturbation("gaussian", epsilon=1.0, delta=1e-6),
                cvxdp.OutputPerturbation("gaussian", epsilon=1.0, delta=1e-6)):
    result = cvxdp.solve(agents, algorithm=algorithm, privacy=privacy, seed=0)
    s = result.summary()
    name = "non-private" if privacy is None else privacy.short_name
    print(f"{name:12s} objective {s['objective']:.5f} (central {reference['objective']:.5f})  "
          f"residual {s['consensus_residual']:.2e}  max violation {s['max_violation']:.1e}  "
          f"privacy {s['privacy']}")
print("consensus x:", np.round(result.solution["x"], 3))
