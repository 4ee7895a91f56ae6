"""The dashboard's scenarios and simulations: the pages' opening scenarios, widget values validated
into a `Scenario` (bad fields named in one message), and each simulation cached by the scenario's
JSON (`st.cache_data`), so moving a slider back or switching pages never simulates the same
scenario twice. A model that does not fit the GPU comes back as a message for `st.error`."""

from __future__ import annotations

import dataclasses

import numpy as np
import streamlit as st
from pydantic import ValidationError

from dashboard.data.saved_files import ROOT
from simulator.result import SimResult
from simulator.scenario import Scenario
from simulator.simulation import simulate
from simulator.summary import SimSummary

# The What-if page's opening scenario: the article's 10x spike on a small chat fleet, sized so that a
# re-render (one simulation of ~1,800 requests) stays within about a second of CPU. At 14 requests/s
# the two replicas run out of KV: P99 TTFT reaches ~10 s (the article's spinners), the autoscaler
# asks for six more replicas whose ~100 s cold starts end after the spike, and the run costs 2.5x
# what it would at 12 requests/s, where the two absorb it (measured 2026-12-03, default calibration).
DEFAULT_WHATIF = {
    "name": "what-if: 10x spike",
    "traffic": {
        "arrivals": {
            "kind": "spike",
            "base": {"kind": "poisson", "rate_per_s": 1.4},
            "multiplier": 10.0,
            "start_s": 60.0,
            "ramp_up_s": 20.0,
            "hold_s": 90.0,
            "ramp_down_s": 20.0,
        },
        "duration_s": 300.0,
        "too_long": "clip",
    },
    "model": {"name": "llama-2-7b"},
    "hardware": {"gpu": "A100-80GB", "tensor_parallel": 1},
    "cluster": {
        "replicas": 2,
        "autoscaler": {"enabled": True, "min_replicas": 2, "max_replicas": 8},
    },
    "scheduler": {"max_num_batched_tokens": 4096},
    "clients": {"ttft_timeout_s": 10.0, "max_retries": 1, "retry_backoff_s": 2.0},
    "slo": {"ttft_p99_s": 2.0, "tpot_p99_s": 0.15},
}
# Traditional vs paged: one replica under steady Poisson load, the load swept.
DEFAULT_POLICY_BASE = {
    "name": "policy sweep",
    "traffic": {
        "arrivals": {"kind": "poisson", "rate_per_s": 1.0},
        "duration_s": 90.0,
        "too_long": "clip",
    },
    "model": {"name": "llama-2-7b"},
    "hardware": {"gpu": "A100-80GB"},
    "scheduler": {"max_num_batched_tokens": 4096},
    "slo": {"ttft_p99_s": 2.0, "tpot_p99_s": 0.15},
}


def default_whatif() -> Scenario:
    return Scenario.model_validate(DEFAULT_WHATIF)


def default_policy_base() -> Scenario:
    return Scenario.model_validate(DEFAULT_POLICY_BASE)


def explain(error: ValidationError) -> str:
    """One clause per bad field, `cluster.replicas: ... (got 0)`; a whole sub-model's value is not repeated."""
    clauses = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "scenario"
        value = item.get("input")
        got = "" if isinstance(value, (dict, list)) else f" (got {value!r})"
        clauses.append(f"{where}: {item['msg'].removeprefix('Value error, ')}{got}")
    return "; ".join(clauses)


def build_scenario(data: dict) -> tuple[Scenario | None, str | None]:
    """A validated scenario from nested widget values, or the bad fields named in one message."""
    try:
        return Scenario.model_validate(data), None
    except ValidationError as error:
        return None, explain(error)


@st.cache_data(max_entries=256, show_spinner=False)
def _simulate_json(scenario_json: str) -> tuple[SimResult | None, str | None]:
    scenario = Scenario.model_validate_json(scenario_json)
    try:
        result = simulate(scenario)
    except (ValueError, KeyError) as error:
        return None, str(error).strip("'\"")
    return dataclasses.replace(
        result, records=[]
    ), None  # per-request records: large, and no page shows them


def run(scenario: Scenario) -> tuple[SimResult | None, str | None]:
    """(result without per-request records, None) or (None, a message naming what is wrong)."""
    return _simulate_json(scenario.model_dump_json())


def policy_point(base: Scenario, policy: str, rate_per_s: float) -> Scenario:
    """`base` on one replica (no autoscaler) under Poisson traffic at `rate_per_s`, with `policy`."""
    data = base.model_dump(mode="json")
    data["traffic"]["arrivals"] = {"kind": "poisson", "rate_per_s": rate_per_s}
    data["cluster"]["replicas"] = 1
    data["cluster"]["autoscaler"]["enabled"] = False
    data["scheduler"]["policy"] = policy
    data["name"] = f"{policy} at {rate_per_s:g} req/s"
    return Scenario.model_validate(data)


@dataclasses.dataclass(frozen=True)
class LoadPoint:
    """One point of a load sweep: `policy` at `load_rps` offered, and what its simulation found."""

    policy: str
    load_rps: float
    summary: SimSummary


def capacity_rps(points: list[LoadPoint], slo_bound: bool) -> float | None:
    """A replica's capacity from a load sweep (requests completed per second): at the highest offered
    load that met the SLO (`slo_bound`), or the most it completed at any load (saturation)."""
    if slo_bound:
        met = [point for point in points if point.summary.meets_slo]
        return (
            max(met, key=lambda point: point.load_rps).summary.throughput_rps or None
            if met
            else None
        )
    return max((point.summary.throughput_rps for point in points), default=None) or None


def gpus_needed(target_rps: float, capacity: float | None, tensor_parallel: int) -> int | None:
    return None if not capacity else int(np.ceil(target_rps / capacity - 1e-9)) * tensor_parallel


# co-located vs disaggregated (the Split page)
SPLIT_EXAMPLE = ROOT / "examples" / "scenarios" / "disaggregated-llama-3-70b-h100.yaml"


def default_split() -> Scenario:
    return Scenario.load(SPLIT_EXAMPLE)


def split_pair(
    base: Scenario,
    prefill_replicas: int,
    decode_replicas: int,
    colocated_replicas: int,
    long_rate_per_s: float,
    cpu_kv_gb: float,
    duration_s: float,
    prefill_gpu: str | None = None,
    decode_gpu: str | None = None,
    mixed_pool: bool = False,
):
    """(co-located result, disaggregated result, error) for the Split page: the same traffic, long-context
    surge at `long_rate_per_s`, fixed fleets (autoscalers off); `mixed_pool`: the split runs Splitwise's
    mixed pool."""
    from simulator.planner.split import Layout, layout_scenario

    parts = (
        [
            part.model_copy(
                update={
                    "arrivals": part.arrivals.model_copy(update={"rate_per_s": long_rate_per_s})
                }
            )
            for part in base.traffic.parts
        ]
        if long_rate_per_s > 0
        else []
    )
    traffic = base.traffic.model_copy(update={"parts": parts, "duration_s": duration_s})
    scenario = base.model_copy(update={"traffic": traffic})
    spec = base.cluster.disaggregation
    tp_p = spec.prefill_tensor_parallel or base.hardware.tensor_parallel
    tp_d = spec.decode_tensor_parallel or base.hardware.tensor_parallel
    colocated, error = run(
        layout_scenario(
            scenario,
            Layout(
                "colocated",
                cpu_kv_gb,
                replicas=colocated_replicas,
                tensor_parallel=base.hardware.tensor_parallel,
            ),
        )
    )
    if error:
        return None, None, error
    split, error = run(
        layout_scenario(
            scenario,
            Layout(
                "disaggregated",
                cpu_kv_gb,
                prefill_replicas=prefill_replicas,
                decode_replicas=decode_replicas,
                prefill_tensor_parallel=tp_p,
                decode_tensor_parallel=tp_d,
                prefill_gpu=prefill_gpu,
                decode_gpu=decode_gpu,
                mixed_pool=mixed_pool,
            ),
        )
    )
    return colocated, split, error


def gpu_names() -> list[str]:
    """The catalog's GPUs (the Split page's pool GPU choices)."""
    from simulator.hardware.catalog import load_catalog

    return [name for name, spec in load_catalog().items() if spec.kind == "gpu"]
