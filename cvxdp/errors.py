"""Error classes: one per kind of mistake, all deriving from :class:`CvxdpError`."""

from __future__ import annotations


class CvxdpError(Exception):
    """Base class of every error cvxdp raises on purpose."""


class InvalidParameterError(CvxdpError, ValueError):
    """A parameter of a cvxdp object or function has a bad type or value."""


class DeclarationError(CvxdpError, ValueError):
    """An agent's CVXPY declaration cannot be used (non-convex, bad shared block, bad data, ...)."""


class InfeasibleAgentError(DeclarationError):
    """An agent's local feasible set is empty."""


class SolverFailedError(CvxdpError, RuntimeError):
    """Every solver of the fallback chain failed on a local subproblem."""

    def __init__(self, message: str, *, agent: str | None = None, round: int | None = None,
                 status: str | None = None):
        super().__init__(message)
        self.agent = agent
        self.round = round
        self.status = status


class BackendError(CvxdpError, RuntimeError):
    """A backend lost nodes (e.g. a Ray actor died): names the agents, the method and the round."""

    def __init__(self, message: str, *, agents: tuple[str, ...] = (), method: str | None = None,
                 round: int | None = None):
        super().__init__(message)
        self.agents = tuple(agents)
        self.method = method
        self.round = round


class ConfigError(CvxdpError, ValueError):
    """A case or study file is malformed or names something unknown."""


class OptionalDependencyError(CvxdpError, ImportError):
    """An optional extra (e.g. ray, pandapower) is needed but not installed."""


class CorruptFileError(CvxdpError, ValueError):
    """A checkpoint or saved result is truncated, garbage, empty or written by something else."""


class OutputError(CvxdpError, OSError):
    """An output directory cannot be written (disk full, read-only, a path under a file, ...)."""


class OutputLockedError(OutputError):
    """Another live cvxdp process is writing the same output directory."""


class PrivacyWarning(UserWarning):
    """A privacy claim is not a guarantee (a paper preset, a failed assumption) or is conditional."""


class StepSizeWarning(UserWarning):
    """A step size (eta, rho) looks wrong for the problem: the run diverges or stagnates, or eta is below an
    agent's gradient Lipschitz constant. ``agent`` names the agent (None: the whole run); ``suggestion`` is the
    suggested setting, e.g. ``{"eta": 60.0}``."""

    def __init__(self, message: str, *, agent: str | None = None, suggestion: dict | None = None) -> None:
        super().__init__(message)
        self.agent = agent
        self.suggestion = dict(suggestion or {})
