"""The capacity simulator: `Scenario` in, `simulate(scenario) -> SimResult` out.

Exports load on first use, so `simulator.calibration` and the memory math import without SimPy.
"""

__all__ = ["Scenario", "simulate", "SimResult"]


def __getattr__(name: str):
    if name == "Scenario":
        from simulator.scenario import Scenario

        return Scenario
    if name == "simulate":
        from simulator.simulation import simulate

        return simulate
    if name == "SimResult":
        from simulator.result import SimResult

        return SimResult
    raise AttributeError(f"module 'simulator' has no attribute {name!r}")
