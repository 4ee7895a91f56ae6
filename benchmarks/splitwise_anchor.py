"""Splitwise (Patel et al., ISCA 2024) in the simulator: its cluster designs at iso-cost against the
co-located baseline, under its SLOs, on its workloads (`benchmarks/disaggregation.py` runs it and prints
the table; published figures in benchmarks/data/disaggregation_published.csv).

- Model and machines: Llama-2-70B, one replica per 8-GPU machine (DGX-A100 / DGX-H100, TP8), each
  pool's step times from its own GPU's shipped calibration (Vidur-fitted, TP8), or (step models
  `roofline`, `splitwise-measured`: `benchmarks/splitwise_rows.py`) roofline-derived ones or those
  fitted on Splitwise's own characterization (`benchmarks/splitwise_steps.py`). Prices, a setting
  (`PRICES`): `catalog`, each GPU at the hardware catalog's list price (A100-80GB $1.79, H100-80GB
  $2.99 per GPU-hour: a DGX-H100 costs 1.67x a DGX-A100), or `splitwise`, Splitwise's own cost model
  (its artifact's 4.76 per DGX-H100 and 2.21 per DGX-A100, 2.15x; read from the published-figures
  file), with which its iso-cost designs were chosen. Only the designs and their costs change with it.
- Workloads: Splitwise's two production traces (Azure LLM inference 2023, conversation and coding;
  ../shared/traces), their prompt and output lengths as the shipped quantile tables of those files,
  Poisson arrivals (as Splitwise's simulator generates its rate sweeps).
- SLO (Splitwise's, as its artifact states them: notebooks/plots.ipynb `get_slo`): every request's
  slowdown against the same request alone on a DGX-A100 (its prompt time at batch 1, its token time
  at batch 1), at three percentiles: TTFT P50 ≤ 2x, P90 ≤ 3x, P99 ≤ 6x; time between tokens (a
  request's mean, (E2E − TTFT) / (tokens − 1)) and E2E P50 ≤ 1.25x, P90 ≤ 1.5x, P99 ≤ 5x. The
  reference times come from the A100 TP8 step model the simulator runs (checked: one request alone
  on a DGX-A100 has slowdown 1.00).
- Designs, iso-cost against a budget of DGX-H100s (the co-located Baseline-H100): Splitwise-HH
  (x H100 prompt + the rest H100 token machines), Splitwise-HA (x H100 prompt + as many A100 token
  machines as fit in the budget, and as fit in 80% of it: Splitwise's "20% lower cost"),
  Splitwise-AA (as many DGX-A100s as fit, split every way), and Baseline-A100 (those co-located). Co-located machines batch with mixed steps (Splitwise's
  baseline: "we use mixed batching unless stated otherwise"); vLLM v0's prefill-only steps
  (`scheduler.mixed_steps: false`) are shown beside it. KV over InfiniBand (HDR on a DGX-A100, NDR
  between DGX-H100s; the slower side's when they differ).
- Throughput at the SLO: the highest Poisson rate at which all nine percentile limits hold (doubled to
  a miss, then bisected), per design; compared with the baseline at its cost.

Splitwise's mixed pool (`cluster.disaggregation.mixed_pool`, `simulator.cluster.mixed_pool`) is a
setting: `designs(mixed_pool=N)` adds each split with it, a queue long past N pending prompt tokens
(Splitwise's 8192). Not modelled: its power-capped H100 token machines (Splitwise-HHcap) and
iso-power designs, and its fleet sizes (tens of machines; here 4-12, so the ratios between pools are
coarse).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from engine.core.step_shape import StepShape
from simulator import simulate
from simulator.calibration.engine_profile import load_profile
from simulator.calibration.profiled_cost_model import ProfiledCostModel
from simulator.calibration.roofline import roofline_calibration
from simulator.calibration.schema import resolve_calibration
from simulator.calibration.shipped import calibration_for
from simulator.hardware.catalog import get_hardware
from simulator.model_spec import ModelSpec
from simulator.planner.split import Layout, layout_scenario

MODEL = "llama-2-70b"
TP = 8  # one replica per DGX machine
REFERENCE_GPU = "A100-80GB"  # slowdowns are against the request alone on a DGX-A100
# Splitwise's SLO: percentile -> slowdown limit, per metric
SLO = {
    "ttft": {50: 2.0, 90: 3.0, 99: 6.0},
    "tbt": {50: 1.25, 90: 1.5, 99: 5.0},
    "e2e": {50: 1.25, 90: 1.5, 99: 5.0},
}
V0 = {"mixed_steps": False}
MIXED = {"mixed_steps": True}
H100, A100 = "H100-80GB", "A100-80GB"
ENGINE_PROFILE = "engine_profile"  # the key of a step model's profile among its calibration files
BUDGET_H100_MACHINES = 4  # iso-cost: every design costs at most this many DGX-H100s
CHEAPER = 0.8  # Splitwise's "20% lower cost"
SPLITWISE_QUEUE_TOKENS = 8192  # its mixed pool's prompt_max_pending_batch_tokens
# how machines are priced: the hardware catalog's list prices, or Splitwise's own cost model
PRICES = ("catalog", "splitwise")
PUBLISHED = Path(__file__).resolve().parent / "data" / "disaggregation_published.csv"


def splitwise_machine_costs() -> dict[str, float]:
    """Splitwise's cost per machine-hour (relative units) by GPU, as the published-figures file
    gives them from Splitwise's artifact: DGX-H100 and DGX-A100."""
    with PUBLISHED.open() as f:
        row = next(r for r in csv.DictReader(f) if r["claim"].startswith("machine cost per hour"))
    found = dict(re.findall(r"DGX-([AH]100) ([0-9.]+)", row["value"]))
    if set(found) != {"H100", "A100"}:
        raise ValueError(f"{PUBLISHED}: expected DGX-H100 and DGX-A100 costs, got {row['value']!r}")
    return {H100: float(found["H100"]), A100: float(found["A100"])}


def machine_cost_per_hour(gpu: str, prices: str) -> float:
    """One 8-GPU machine's cost per hour: USD at catalog prices, Splitwise's units at its own."""
    if prices == "catalog":
        return TP * get_hardware(gpu).price_usd_per_hour
    if prices == "splitwise":
        return splitwise_machine_costs()[gpu]
    raise ValueError(f"prices {prices!r}: expected one of {', '.join(PRICES)}")


@dataclass(frozen=True)
class Design:
    name: str
    layout: Layout
    changes: dict  # scheduler settings
    link: str
    prices: str = "catalog"  # one of PRICES
    # Splitwise's mixed pool (`cluster.disaggregation.mixed_pool`) with this queue limit; None: off
    mixed_pool: int | None = None

    @property
    def machines(self) -> str:
        layout = self.layout
        if layout.kind == "colocated":
            return f"{layout.replicas} x {layout.gpu}"
        return (
            f"{layout.prefill_replicas} x {layout.prefill_gpu} prompt + "
            f"{layout.decode_replicas} x {layout.decode_gpu} token"
        )

    @property
    def cost_per_hour(self) -> float:
        """The fleet's cost per hour at its `prices`: each machine at its GPU's machine cost."""
        layout = self.layout
        if layout.kind == "colocated":
            pools = [(layout.replicas, layout.gpu)]
        else:
            pools = [
                (layout.prefill_replicas, layout.prefill_gpu),
                (layout.decode_replicas, layout.decode_gpu),
            ]
        return sum(n * machine_cost_per_hour(gpu, self.prices) for n, gpu in pools)


def colocated_design(name: str, replicas: int, gpu: str, changes: dict, prices: str) -> Design:
    """`replicas` co-located machines of `gpu` (TP8 each) with scheduler `changes`."""
    layout = Layout("colocated", 0, replicas=replicas, tensor_parallel=TP, gpu=gpu)
    return Design(name, layout, changes, "infiniband-ndr", prices)


def split_design(
    family: str, x: int, prompt_gpu: str, y: int, token_gpu: str, prices: str
) -> Design:
    """`x` prompt machines of `prompt_gpu` and `y` token machines of `token_gpu` (TP8 each)."""
    layout = Layout(
        "disaggregated",
        0,
        prefill_replicas=x,
        decode_replicas=y,
        prefill_tensor_parallel=TP,
        decode_tensor_parallel=TP,
        prefill_gpu=prompt_gpu,
        decode_gpu=token_gpu,
    )
    h100_only = prompt_gpu == token_gpu == "H100-80GB"
    link = "infiniband-ndr" if h100_only else "infiniband-hdr"
    return Design(f"{family} {x}P{y}D", layout, MIXED, link, prices)


def designs(
    budget: int = BUDGET_H100_MACHINES, prices: str = "catalog", mixed_pool: int | None = None
) -> list[Design]:
    """The baseline (co-located DGX-H100s) and, at most at its cost under `prices`, each Splitwise
    design's splits that no further machine fits beside; Splitwise-HA's also at 20% under it;
    `mixed_pool`: each split also with Splitwise's mixed pool, a queue long past that many pending
    prompt tokens ("... + mixed pool", after it; "... + mixed pool N" when N is not Splitwise's 8192)."""
    h100, a100 = (machine_cost_per_hour(gpu, prices) for gpu in (H100, A100))
    limit = budget * h100 * (1 + 1e-9)
    a100s = int(limit // a100)
    baseline = f"Baseline-H100 ({budget} machines"
    out = [
        colocated_design(f"{baseline}, mixed batching)", budget, H100, MIXED, prices),
        colocated_design(f"{baseline}, vLLM v0: no mixed steps)", budget, H100, V0, prices),
        colocated_design(
            f"Baseline-A100 ({a100s} machines, mixed batching)", a100s, A100, MIXED, prices
        ),
    ]
    out += [
        split_design("Splitwise-HH", x, H100, budget - x, H100, prices) for x in range(1, budget)
    ]
    for share in (1.0, CHEAPER):
        for x in range(1, budget):
            y = int((share * limit - x * h100) // a100)
            name = f"Splitwise-HA {x}P{y}D"
            if y >= 1 and name not in [design.name for design in out]:
                out.append(split_design("Splitwise-HA", x, H100, y, A100, prices))
    out += [split_design("Splitwise-AA", x, A100, a100s - x, A100, prices) for x in range(1, a100s)]
    if mixed_pool is not None:
        label = " + mixed pool" + (f" {mixed_pool}" if mixed_pool != SPLITWISE_QUEUE_TOKENS else "")
        out = [
            variant
            for design in out
            for variant in (
                (design, replace(design, name=design.name + label, mixed_pool=mixed_pool))
                if design.layout.kind == "disaggregated"
                else (design,)
            )
        ]
    return out


def _workload(trace: str) -> dict:
    """One of Splitwise's two workloads: Llama-2-70B with an Azure 2023 trace's lengths."""
    return dict(
        model=MODEL,
        gpu=A100,
        prompt={"kind": "preset", "name": f"azure-{trace}-prompt"},
        output={"kind": "preset", "name": f"azure-{trace}-output"},
        ttft_s=3600.0,  # unused: Splitwise's slowdown SLO is judged on the records
        tpot_s=3600.0,
        start_rps=1.0,
    )


WORKLOADS = {
    "Splitwise conversation (Azure conv)": _workload("conv"),
    "Splitwise coding (Azure code)": _workload("code"),
}


class Reference:
    """Each request's times alone on a DGX-A100 (batch 1), from the step model the simulator runs there."""

    def __init__(self, profile_name: str, calibrations: dict[str, str] | None = None):
        calibration = (
            resolve_calibration(calibrations[REFERENCE_GPU])
            if calibrations
            else calibration_for(MODEL, REFERENCE_GPU, TP)
        )
        profile = (calibrations or {}).get(ENGINE_PROFILE, profile_name)
        self.model = ProfiledCostModel.of_calibration(calibration, load_profile(profile))
        self._cache: dict[int, tuple[float, float]] = {}

    def times(self, prompt_tokens: int) -> tuple[float, float]:
        """(prompt time, token time at the prompt's context), as Splitwise's `add_baseline_perf`."""
        if prompt_tokens not in self._cache:
            self._cache[prompt_tokens] = (
                self.model.step_time(StepShape(((prompt_tokens, 0),), ())),
                self.model.step_time(StepShape((), (prompt_tokens,))),
            )
        return self._cache[prompt_tokens]


def slowdowns(records, reference: Reference) -> dict[str, np.ndarray]:
    """Per request: TTFT, mean time between tokens and E2E over the same request alone on a DGX-A100
    (a request that did not finish counts as infinitely slow)."""
    out = {"ttft": [], "tbt": [], "e2e": []}
    for record in records:
        prompt_s, token_s = reference.times(record.prompt_tokens)
        tokens = record.expected_output_tokens
        if not record.ok:
            out["ttft"].append(np.inf)
            out["e2e"].append(np.inf)
            if tokens > 1:
                out["tbt"].append(np.inf)
            continue
        out["ttft"].append(record.ttft_s / prompt_s)
        out["e2e"].append(record.e2e_s / (prompt_s + token_s * (tokens - 1)))
        if tokens > 1:
            out["tbt"].append((record.e2e_s - record.ttft_s) / (tokens - 1) / token_s)
    return {name: np.asarray(values) for name, values in out.items()}


def slo_margin(records, reference: Reference) -> dict[str, float]:
    """Each percentile's slowdown over its limit (≤ 1: held), keyed like `ttft_p99`."""
    found = slowdowns(records, reference)
    return {
        f"{metric}_p{q}": float(np.percentile(found[metric], q)) / limit
        for metric, limits in SLO.items()
        for q, limit in limits.items()
    }


def roofline_calibrations(directory: Path) -> dict[str, str]:
    """The sensitivity run's step models: each GPU's roofline-derived calibration (weights read once
    per step, FLOPs at a fixed efficiency; no table behind it), as files a scenario can name."""
    out = {}
    for gpu in (H100, A100):
        calibration = roofline_calibration(ModelSpec.from_preset(MODEL), get_hardware(gpu), TP)
        out[gpu] = str(calibration.save(directory / f"{MODEL}-{gpu}-tp{TP}-roofline.json"))
    return out


def run(
    workload: dict,
    design: Design,
    rate: float,
    duration_s: float,
    scenario_for,
    calibrations: dict[str, str] | None = None,
):
    """One simulation of `design` at `rate`; `calibrations`: GPU -> calibration file for every
    machine of that GPU (default: the shipped ones), and under `ENGINE_PROFILE` the engine profile
    to time them with (default: the scenario's)."""
    scenario = layout_scenario(
        scenario_for(workload, rate, duration_s, design.changes), design.layout, design.link
    )
    if calibrations and ENGINE_PROFILE in calibrations:
        scenario = scenario.model_copy(update={"engine_profile": calibrations[ENGINE_PROFILE]})
    if design.mixed_pool is not None:
        spec = scenario.cluster.disaggregation.model_copy(
            update={"mixed_pool": True, "mixed_pool_max_pending_tokens": design.mixed_pool}
        )
        cluster = scenario.cluster.model_copy(update={"disaggregation": spec})
        scenario = scenario.model_copy(update={"cluster": cluster})
    if calibrations:
        layout, spec = design.layout, scenario.cluster.disaggregation
        if layout.kind == "colocated":
            hardware = scenario.hardware.model_copy(
                update={"calibration": calibrations[layout.gpu]}
            )
            scenario = scenario.model_copy(update={"hardware": hardware})
        else:
            pools = {
                role: getattr(spec, role).model_copy(
                    update={"calibration": calibrations[getattr(layout, f"{role}_gpu")]}
                )
                for role in ("prefill", "decode")
            }
            cluster = scenario.cluster.model_copy(
                update={"disaggregation": spec.model_copy(update=pools)}
            )
            scenario = scenario.model_copy(update={"cluster": cluster})
    return simulate(scenario)


def check_reference(
    workload: dict, scenario_for, calibrations: dict[str, str] | None = None
) -> float:
    """One request alone on a DGX-A100: its TTFT slowdown (1.00 when the reference is the simulator's)."""
    design = colocated_design("one A100 machine", 1, A100, MIXED, "catalog")
    one = {"kind": "constant", "rate_per_s": 1.0}  # a single request at t = 0

    def for_one(work, rate, duration_s, changes):
        scenario = scenario_for(work, rate, duration_s, changes)
        traffic = scenario.traffic.model_copy(update={"arrivals": one})
        return scenario.model_copy(update={"traffic": traffic})

    result = run(workload, design, 1.0, 1.0, for_one, calibrations)
    reference = Reference(result.facts["calibration"]["engine_profile"], calibrations)
    return float(slowdowns(result.records, reference)["ttft"][0])
