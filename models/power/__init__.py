"""Zone-decomposed SOC power flow (SPEC §6.1): network data, the SOC-WR model, zones and the template."""

from .ac_check import ac_mismatch, run_ac_check
from .network import (
    BUNDLED_CASES,
    PowerCase,
    available_cases,
    bundled_cases,
    case_from_matpower,
    load_case,
    load_matpower,
    load_network,
    make_ybus,
    run_ac_power_flow,
)
from .soc import SocLayout, SocModel, build_soc, solve_central
from .template import ZoneModel, build, build_agents, load_sensitivity
from .zones import auto_zones, clear_auto_zones_cache, parse_zones, validate_zones, zone_of_bus

__all__ = [
    "BUNDLED_CASES",
    "PowerCase",
    "SocLayout",
    "SocModel",
    "ZoneModel",
    "ac_mismatch",
    "auto_zones",
    "available_cases",
    "build",
    "build_agents",
    "build_soc",
    "clear_auto_zones_cache",
    "bundled_cases",
    "case_from_matpower",
    "load_case",
    "load_matpower",
    "load_network",
    "load_sensitivity",
    "make_ybus",
    "parse_zones",
    "run_ac_check",
    "run_ac_power_flow",
    "solve_central",
    "validate_zones",
    "zone_of_bus",
]
