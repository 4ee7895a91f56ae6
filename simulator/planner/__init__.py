"""The capacity planner: the cheapest fleet and batch settings that hold the SLO through a spike, with
cost per request, error bars from the calibration, and the baselines it beats.

    from simulator.planner import plan, load_plan
    scenario, settings = load_plan("examples/scenarios/plan-spike-llama-2-7b.yaml")
    result = plan(scenario, settings)
    result.report.recommendation         # GPU, replicas, batch settings, $/hour, $/request, binding constraint
    result.report.to_json()              # the same as `surgeplan plan --json`
    result.write("out/")                 # plan.json, ledger.csv/.json, pareto.html, the two scenarios

Exports load on first use (`plan` pulls in SimPy and the cluster).
"""

__all__ = ["plan", "PlanResult", "PlanSettings", "PlanError", "load_plan"]


def __getattr__(name: str):
    if name in ("plan", "PlanResult"):
        from simulator.planner import recommend as module

        return getattr(module, name)
    if name in ("PlanSettings", "PlanError", "load_plan"):
        from simulator.planner import spec

        return getattr(spec, name)
    raise AttributeError(f"module 'simulator.planner' has no attribute {name!r}")
