"""Splitwise's designs, each searched for its throughput under Splitwise's SLO (`benchmarks/splitwise_anchor.py`
says what is run); the last table of `benchmarks/disaggregation.py`."""

import tempfile
import time
from pathlib import Path

from benchmarks import splitwise_anchor as splitwise
from benchmarks.goodput_search import WHOLE_STEP_PROFILE, highest_rate, scenario_for
from benchmarks.splitwise_steps import measured_calibrations


def splitwise_rows(
    duration_s: float,
    steps: int,
    only: list[str] | None,
    budget: int = splitwise.BUDGET_H100_MACHINES,
    designs: list[str] | None = None,
    step_models: tuple[str, ...] = ("shipped", "roofline"),
    prices: str = "catalog",
    mixed_pool: int | None = None,
) -> list[dict]:
    """Each Splitwise design's throughput under Splitwise's SLO against the co-located baseline, on
    the shipped (table-fitted) step models, then on roofline-derived ones (a sensitivity run), then on
    Splitwise's own measured steps (`benchmarks/splitwise_steps.py`) where asked; designs
    and costs at `prices` (`splitwise_anchor.PRICES`); `mixed_pool`: each split also with Splitwise's
    mixed pool, a queue long past that many pending prompt tokens."""
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        for step_model in step_models:
            files = {
                "shipped": lambda folder: None,
                "roofline": splitwise.roofline_calibrations,
                "splitwise-measured": measured_step_model,
                "splitwise-sim": lambda folder: measured_step_model(folder, as_simulated=True),
            }[step_model](Path(directory))
            for name, workload in splitwise.WORKLOADS.items():
                if only and not any(name.startswith(prefix) for prefix in only):
                    continue
                check = splitwise.check_reference(workload, scenario_for, files)
                print(
                    f"\n{name}, {step_model} step models: one request alone on a DGX-A100 has "
                    f"TTFT slowdown {check:.3f} (expected 1)"
                )
                chosen = [
                    design
                    for design in splitwise.designs(budget, prices, mixed_pool)
                    if not designs or any(design.name.startswith(prefix) for prefix in designs)
                ]
                rows += _splitwise_workload(
                    name, workload, step_model, files, duration_s, steps, chosen
                )
    return rows


def measured_step_model(folder: Path, as_simulated: bool = False) -> dict[str, str]:
    """Splitwise's measured steps per GPU (`as_simulated`: token steps as splitwise-sim times them),
    timed as whole steps (a profile that adds nothing)."""
    files = measured_calibrations(folder, as_simulated)
    return files | {splitwise.ENGINE_PROFILE: str(WHOLE_STEP_PROFILE)}


def _splitwise_workload(
    name, workload, step_model, files, duration_s, steps, designs
) -> list[dict]:
    rows, base, reference = [], {}, None
    for design in designs:  # the first: the baseline (co-located DGX-H100s, mixed batching)
        started = time.process_time()
        margins: dict[float, dict] = {}

        def holds(rate: float, design=design, margins=margins) -> bool:
            nonlocal reference
            result = splitwise.run(workload, design, rate, duration_s, scenario_for, files)
            profile = result.facts["calibration"]["engine_profile"]
            reference = reference or splitwise.Reference(profile, files)
            margins[rate] = splitwise.slo_margin(result.records, reference)
            return max(margins[rate].values()) <= 1.0

        layout = design.layout
        machines = layout.replicas or (layout.prefill_replicas + layout.decode_replicas)
        rate = highest_rate(holds, workload["start_rps"] * machines, steps)
        cost = design.cost_per_hour
        base.setdefault("mixed", (rate, cost))
        if "v0" in design.name:
            base["v0"] = (rate, cost)
        missed = [r for r in margins if r > rate]
        binding = margins[min(missed)] if missed else {}
        base_rate, base_cost = base["mixed"]
        row = {
            "workload": name,
            "step_model": step_model,
            "design": design.name,
            "machines": design.machines,
            "prices": design.prices,
            "cost_per_hour": round(cost, 2),
            "cost_vs_baseline": round(cost / base_cost, 2),
            "throughput_rps": round(rate, 3),
            "vs_baseline": round(rate / base_rate, 2) if base_rate else None,
            "vs_v0_baseline": round(rate / base["v0"][0], 2) if base.get("v0", (0,))[0] else None,
            "per_cost_vs_baseline": round(rate / cost / (base_rate / base_cost), 2)
            if base_rate
            else None,
            "binding_at_miss": max(binding, key=binding.get) if binding else None,
            "cpu_s": round(time.process_time() - started, 1),
        }
        rows.append(row)
        print(" | ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    return rows
