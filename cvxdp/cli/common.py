"""What the command-line modules share: one-line errors, the JSON or human output, the backend options and
which mechanisms each algorithm runs (light: click and the standard library only)."""

from __future__ import annotations

import functools
import json
import math
import pickle
import zlib

import click

from ..errors import CvxdpError, describe_oserror


def emit(payload: dict, as_json: bool, human: str) -> None:
    if as_json:
        from ..run import jsonable  # start-up: numpy and pandas load only for a solving command's --json

        click.echo(json.dumps(jsonable(payload)))
    else:
        click.echo(human)


def friendly_errors(func):
    """Turn cvxdp's own errors, OS errors (missing file, disk full, read-only), truncated or corrupt
    compressed files and unpicklable data into one clear line and a non-zero exit status (never click's
    bare "Aborted!", never a traceback)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (CvxdpError, FileNotFoundError) as exc:
            raise click.ClickException(f"{type(exc).__name__}: {exc}") from None
        except OSError as exc:
            where = f" ({exc.filename})" if exc.filename else ""
            raise click.ClickException(f"{type(exc).__name__}: {describe_oserror(exc)}{where}") from None
        except (EOFError, zlib.error, pickle.UnpicklingError) as exc:
            raise click.ClickException(f"{type(exc).__name__}: a file is truncated or corrupt ({exc}); "
                                       "check the data and output files named in the command.") from None

    return wrapper


#: Which mechanisms each algorithm runs, for ``--help`` (which loads no algorithm; ``cvxdp run`` refuses the rest
#: before anything starts by asking the algorithm's ``accepts``): tests/config/test_schema.py checks this copy
#: against every algorithm's ``accepts``.
SUPPORTED_MECHANISMS = {"ladmm": ("none", "ObjL", "ObjG", "OutL", "OutG"), "admm": ("none",),
                        "sharing": ("none", "OutG"), "madmm": ("none", "gamma"), "dvp": ("none", "gamma"),
                        "radmm": ("none", "gamma"), "mradmm": ("none", "gamma")}
MECH_HELP = "; ".join(f"{a}: {', '.join(m)}" for a, m in SUPPORTED_MECHANISMS.items())


def finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def num(value, fmt: str) -> str:
    return "n/a" if value is None else format(value, fmt)


def rounded(value, digits: int = 4) -> str:
    """Human text for a number or a nested dict/list of numbers, each float to ``digits`` significant digits
    (``0.00030000000000000003`` -> ``0.0003``); the JSON output keeps full precision."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        return format(value, f".{digits}g")
    if isinstance(value, dict):
        return ", ".join(f"{k} {rounded(v, digits)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(rounded(v, digits) for v in value) + ")"
    return str(value)


def backend_options(func):
    """``--backend serial|ray`` with ``--ray-cpus`` / ``--ray-address`` (override the case's [run] table)."""
    for option in reversed((
            click.option("--backend", type=click.Choice(["serial", "ray"]), default=None,
                         help="Where the agents run: serial (default) or ray (Ray actors, `pip install "
                              "'cvxdp[ray]'`; same seed, same numbers). Overrides [run] backend."),
            click.option("--ray-cpus", type=click.IntRange(min=1), default=None,
                         help="With --backend ray: CPUs of the local Ray instance (default: all)."),
            click.option("--ray-address", default=None,
                         help="With --backend ray: join an existing Ray cluster at this address."))):
        func = option(func)
    return func


def backend_overrides(backend, ray_cpus, ray_address, current: str | None = None) -> dict:
    """The [run] entries the backend options set; ``current`` is the case's own [run] backend."""
    if (backend or current) != "ray" and (ray_cpus is not None or ray_address is not None):
        raise click.UsageError("--ray-cpus and --ray-address go with --backend ray.")
    return {"backend": backend, "ray_cpus": ray_cpus, "ray_address": ray_address}


def apply_backend(run: dict, backend, ray_cpus, ray_address) -> None:
    """Override the case's [run] table (``--backend serial`` also drops its ray_* entries)."""
    overrides = backend_overrides(backend, ray_cpus, ray_address, run.get("backend"))
    if backend == "serial":
        run.pop("ray_cpus", None)
        run.pop("ray_address", None)
    run.update({k: v for k, v in overrides.items() if v is not None})
