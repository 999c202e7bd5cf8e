"""Deterministic simulation of Raft groups: seeded faults, safety checked after every step."""

from raft.sim.checker import SafetyChecker, SafetyViolation
from raft.sim.simulation import SimOptions, SimResult, Simulation, run_seed

__all__ = ["SafetyChecker", "SafetyViolation", "SimOptions", "SimResult", "Simulation", "run_seed"]
