"""Co-located or disaggregated, with or without a host KV tier: the cheapest fixed fleet that holds the SLO.

For each layout the planner simulates the scenario's traffic on fixed fleets (autoscalers off) and keeps
the fewest GPUs that meet the SLO:
- co-located, per tensor-parallel degree and host tier: bisection on the replica count (meeting the SLO
  is monotone in it);
- disaggregated (xPyD), per (prefill TP, decode TP) and host tier: a staircase walk over the prefill
  replicas x and decode replicas y. The fewest prefill replicas that hold the SLO can only fall as decode
  replicas are added, so starting from (x_max, 1) it steps x down while the SLO holds and y up while it
  does not: O(x_max + y_max) simulations find every minimal (x, y), of which the cheapest is kept.
Each split is tried with and without Splitwise's mixed pool where asked (`mixed_pools`; default: as the
scenario's `cluster.disaggregation.mixed_pool` says), so a split that only holds the spike with the
mixed pool is found. The answer (`SplitAnswer`) names the cheapest fleet that holds the SLO, its ratio
(xPyD and each pool's GPUs), TP degrees, cost and P99s, against the cheapest co-located fleet without a
host tier, and says whether a split, and whether a host tier, holds the SLO with fewer GPUs: "would
splitting prefill and decode, or adding host memory for KV, hold this spike with fewer GPUs?" in one
sentence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from itertools import product

from simulator.fleet_spec import AutoscalerSpec, DisaggregationSpec, PoolSettings
from simulator.planner.split_answer import SplitAnswer, answer
from simulator.scenario import Scenario
from simulator.simulation import simulate


@dataclass(frozen=True)
class Layout:
    kind: str  # "colocated" or "disaggregated"
    cpu_kv_gb: float
    replicas: int = 0  # co-located
    tensor_parallel: int = 0
    prefill_replicas: int = 0  # disaggregated
    decode_replicas: int = 0
    prefill_tensor_parallel: int = 0
    decode_tensor_parallel: int = 0
    gpu: str | None = None  # co-located: the replicas' GPU (None: the scenario's)
    prefill_gpu: str | None = None  # disaggregated: each pool's GPU (None: the scenario's)
    decode_gpu: str | None = None
    mixed_pool: bool = False  # disaggregated: Splitwise's mixed pool on

    @property
    def gpus(self) -> int:
        if self.kind == "colocated":
            return self.replicas * self.tensor_parallel
        return (
            self.prefill_replicas * self.prefill_tensor_parallel
            + self.decode_replicas * self.decode_tensor_parallel
        )

    @property
    def label(self) -> str:
        tier = f" + {self.cpu_kv_gb:g} GB host KV" if self.cpu_kv_gb else ""
        tier += " + mixed pool" if self.mixed_pool else ""
        if self.kind == "colocated":
            on = f" {self.gpu}" if self.gpu else ""
            return f"co-located {self.replicas} x{on} TP{self.tensor_parallel}{tier}"
        prefill = f"{self.prefill_gpu} " if self.prefill_gpu else ""
        decode = f"{self.decode_gpu} " if self.decode_gpu else ""
        return (
            f"{self.prefill_replicas}P{self.decode_replicas}D (prefill {prefill}"
            f"TP{self.prefill_tensor_parallel}, decode {decode}TP{self.decode_tensor_parallel}){tier}"
        )


@dataclass
class Outcome:
    layout: Layout
    meets_slo: bool
    gpus: int
    cost_usd: float
    cost_per_request_usd: float | None
    ttft_p99_s: float | None
    tpot_p99_s: float | None
    slo_attainment: float
    kv_transfer_p99_s: float | None
    prefix_hit_rate_cpu: float
    usd_per_hour: float | None = None  # the fleet's GPUs at each one's catalog price
    mixed_pool_moves: int = 0  # machines the mixed pool moved (0 when off)

    def row(self) -> dict:
        return {
            "layout": self.layout.label,
            **asdict(self.layout),
            **{k: v for k, v in asdict(self).items() if k != "layout"},
        }


@dataclass
class SplitPlan:
    outcomes: list[Outcome] = field(default_factory=list)  # every simulation, in order
    best: dict[str, Outcome | None] = field(default_factory=dict)  # per layout kind (and tier)
    recommendation: Outcome | None = None
    answer: SplitAnswer | None = None

    def rows(self) -> list[dict]:
        return [outcome.row() for outcome in self.outcomes]


def layout_scenario(scenario: Scenario, layout: Layout, link: str = "infiniband-ndr") -> Scenario:
    """The scenario on a fixed fleet of this layout (autoscalers off)."""
    off = AutoscalerSpec(enabled=False)
    scheduler = scenario.scheduler.model_copy(update={"cpu_kv_gb": layout.cpu_kv_gb})
    if layout.kind == "colocated":
        cluster = scenario.cluster.model_copy(
            update={"replicas": layout.replicas, "autoscaler": off, "disaggregation": None}
        )
        hardware = scenario.hardware.model_copy(
            update={"tensor_parallel": layout.tensor_parallel}
            | (
                {"gpu": layout.gpu, "calibration": None}
                if layout.gpu and layout.gpu != scenario.hardware.gpu
                else {}
            )
        )
        return scenario.model_copy(
            update={"cluster": cluster, "hardware": hardware, "scheduler": scheduler}
        )
    old = scenario.cluster.disaggregation
    gpus = {"prefill": layout.prefill_gpu, "decode": layout.decode_gpu}
    pools = {
        name: (getattr(old, name) if old is not None else PoolSettings()).model_copy(
            update={"autoscaler": off} | ({"gpu": gpus[name]} if gpus[name] else {})
        )
        for name in ("prefill", "decode")
    }
    spec = DisaggregationSpec(
        prefill_replicas=layout.prefill_replicas,
        decode_replicas=layout.decode_replicas,
        prefill_tensor_parallel=layout.prefill_tensor_parallel,
        decode_tensor_parallel=layout.decode_tensor_parallel,
        link=old.link if old is not None else link,
        mixed_pool=layout.mixed_pool,
        **pools,
        **({"mixed_pool_max_pending_tokens": old.mixed_pool_max_pending_tokens} if old else {}),
    )
    cluster = scenario.cluster.model_copy(update={"disaggregation": spec, "autoscaler": off})
    return scenario.model_copy(update={"cluster": cluster, "scheduler": scheduler})


def fleet_usd_per_hour(scenario: Scenario, layout: Layout) -> float:
    """The layout's GPUs, each at its GPU's price (`simulator.disaggregation.pool_price_usd_per_gpu_hour`)."""
    from simulator.disaggregation import pool_price_usd_per_gpu_hour
    from simulator.hardware.catalog import get_hardware

    def price(gpu: str | None, pool: str | None = None) -> float:
        old = scenario.cluster.disaggregation
        named = gpu or (getattr(old, pool).gpu if old is not None and pool else None)
        return pool_price_usd_per_gpu_hour(scenario, get_hardware(named or scenario.hardware.gpu))

    if layout.kind == "colocated":
        return layout.replicas * layout.tensor_parallel * price(layout.gpu)
    return layout.prefill_replicas * layout.prefill_tensor_parallel * price(
        layout.prefill_gpu, "prefill"
    ) + layout.decode_replicas * layout.decode_tensor_parallel * price(layout.decode_gpu, "decode")


def plan_split(
    scenario: Scenario,
    tensor_parallels: list[int] | None = None,
    max_replicas: int = 8,
    cpu_kv_gb: list[float] | None = None,
    link: str = "infiniband-ndr",
    progress: Callable[[str], None] | None = None,
    gpus: list[str] | None = None,
    prefill_gpus: list[str] | None = None,
    decode_gpus: list[str] | None = None,
    mixed_pools: list[bool] | None = None,
) -> SplitPlan:
    """`gpus`: co-located GPU types to try; `prefill_gpus` / `decode_gpus`: each pool's (default: the
    scenario's). With more than one GPU type, fleets are ranked by their price per hour first.
    `mixed_pools`: each split with Splitwise's mixed pool off and/or on (default: the scenario's)."""
    tps = tensor_parallels or [scenario.hardware.tensor_parallel]
    tiers = cpu_kv_gb if cpu_kv_gb is not None else [scenario.scheduler.cpu_kv_gb]
    old = scenario.cluster.disaggregation
    mixed = mixed_pools or [old is not None and old.mixed_pool]
    plan = SplitPlan()
    cache: dict[Layout, Outcome] = {}

    def run(layout: Layout) -> Outcome:
        if layout not in cache:
            summary = simulate(layout_scenario(scenario, layout, link)).summary
            cache[layout] = outcome = Outcome(
                layout,
                bool(summary.meets_slo),
                layout.gpus,
                summary.cost_usd,
                summary.cost_per_request_usd,
                summary.ttft_p99_s,
                summary.tpot_p99_s,
                summary.slo_attainment,
                summary.kv_transfer_p99_s,
                summary.prefix_hit_rate_cpu,
                fleet_usd_per_hour(scenario, layout),
                summary.mixed_pool_moves,
            )
            plan.outcomes.append(outcome)
            if progress is not None:
                progress(f"{layout.label}: {'meets' if outcome.meets_slo else 'misses'} the SLO")
        return cache[layout]

    pairs = [(gpu_p, gpu_d) for gpu_p in prefill_gpus or [None] for gpu_d in decode_gpus or [None]]
    for tier in tiers:
        for gpu in gpus or [None]:
            for tp in tps:
                _keep(
                    plan,
                    f"colocated, {tier:g} GB host KV",
                    _bisect(
                        lambda n, tp=tp, tier=tier, gpu=gpu: run(
                            Layout("colocated", tier, replicas=n, tensor_parallel=tp, gpu=gpu)
                        ),
                        max_replicas,
                    ),
                )
        for (gpu_p, gpu_d), tp_p, tp_d, on in product(pairs, tps, tps, mixed):
            _keep(
                plan,
                f"disaggregated{', mixed pool' if on else ''}, {tier:g} GB host KV",
                _staircase(
                    lambda x, y, tp=(tp_p, tp_d), tier=tier, g=(gpu_p, gpu_d), on=on: run(
                        Layout(
                            "disaggregated",
                            tier,
                            prefill_replicas=x,
                            decode_replicas=y,
                            prefill_tensor_parallel=tp[0],
                            decode_tensor_parallel=tp[1],
                            prefill_gpu=g[0],
                            decode_gpu=g[1],
                            mixed_pool=on,
                        )
                    ),
                    max_replicas,
                ),
            )
    plan.answer = answer(plan.best, _price)
    plan.recommendation = plan.answer.recommendation
    return plan


def _price(outcome: Outcome) -> tuple:
    """Cheapest first: the fleet's price per hour (the GPU count when unpriced), GPUs, the run's cost,
    P99 TTFT. With one GPU type the price per hour orders fleets as their GPU count does."""
    per_hour = outcome.usd_per_hour if outcome.usd_per_hour is not None else outcome.gpus
    return per_hour, outcome.gpus, outcome.cost_usd, outcome.ttft_p99_s or 0.0


def _keep(plan: SplitPlan, key: str, found: Outcome | None) -> None:
    current = plan.best.get(key)
    if found is not None and (current is None or _price(found) < _price(current)):
        plan.best[key] = found
    else:
        plan.best.setdefault(key, None)


def _bisect(run: Callable[[int], Outcome], high: int) -> Outcome | None:
    if not run(high).meets_slo:
        return None
    low, best = 1, run(high)
    while low < best.layout.replicas:
        mid = (low + best.layout.replicas) // 2
        outcome = run(mid)
        if outcome.meets_slo:
            best = outcome
        else:
            low = mid + 1
    return best


def _staircase(run: Callable[[int, int], Outcome], high: int) -> Outcome | None:
    x, y, best = high, 1, None
    while x >= 1 and y <= high:
        outcome = run(x, y)
        if outcome.meets_slo:
            if best is None or _price(outcome) < _price(best):
                best = outcome
            x -= 1
        else:
            y += 1
    return best
