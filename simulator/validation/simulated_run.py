"""The simulator's twin of a live run in `validate`: the same requests on one simulated replica with
the live engine's exact settings and KV pool, and the same again with every step scaled by the host
speed measured in each repeat (the error "at run speed", step 4 of `validate`'s docstring). Apart
from `validate.py` so the simulator side of the comparison reads on its own."""

from __future__ import annotations

from engine.core.config import engine_configs
from simulator.calibration.cost_model import CostModel, scaled_calibration
from simulator.calibration.engine_profile import EngineProfile
from simulator.calibration.live_run import LiveEngine, LiveRequests
from simulator.calibration.profiled_cost_model import ProfiledCostModel
from simulator.calibration.schema import Calibration
from simulator.cluster.cluster import Cluster, ClusterConfig
from simulator.validation.compare import mean_by_key, relative_errors, summary_of, verdicts


def simulate_like(
    live: LiveEngine,
    calibration: Calibration,
    requests: LiveRequests,
    profile: EngineProfile | None = None,
) -> tuple[list, float, float | None]:
    """The same requests on one simulated replica with the live engine's settings and KV pool (and our
    engine's profile: the measured live-vs-calibrated gap, when given)."""
    cache_config, scheduler_config = engine_configs(
        live.settings,
        num_kv_blocks=live.num_kv_blocks,
        max_model_len=live.settings.max_model_len,
        enable_prefix_caching=False,
    )
    step_model = CostModel.from_calibration(calibration)
    if profile is not None:
        step_model = ProfiledCostModel(step_model, profile, num_layers=calibration.model.num_layers)
    config = ClusterConfig(
        scheduler_config=scheduler_config,
        cache_config=cache_config,
        cost_model=step_model,
        tensor_parallel=1,
        initial_replicas=1,
        router_policy="round_robin",
        max_waiting_per_replica=None,
        ttft_timeout_s=None,
        max_retries=0,
        retry_backoff_s=1.0,
        cold_start_s=0.0,
        window_s=1.0,
        scrape_interval_s=None,
        seed=0,
    )
    n = len(requests.arrival_s)
    cluster = Cluster(
        config,
        [float(a) for a in requests.arrival_s],
        [int(p) for p in requests.prompt_tokens],
        [int(o) for o in requests.output_tokens],
        ["default"] * n,
    )
    end = cluster.run()
    return cluster.records, end, cluster.monitor.kv_utilization


def at_run_speed(
    live,
    calibration: Calibration,
    requests: LiveRequests,
    summaries: list[dict],
    sources: dict | None,
    floor: dict | None,
) -> dict | None:
    """Each repeat simulated with its own measured host speed and compared with that repeat; the mean
    error over repeats (step 4 of `validate`'s docstring). None without a step log to measure the speed."""
    factors = (sources or {}).get("live_over_model_step_time") or []
    if not factors or not all(factors):
        return None
    per_repeat = []
    for factor, measured in zip(factors, summaries):
        records, end, kv = simulate_like(live, scaled_calibration(calibration, factor), requests)
        per_repeat.append(relative_errors(measured, summary_of(records, end, kv)))
    errors = mean_by_key(per_repeat)
    return {"speed_factors": factors, "relative_error": errors, "verdict": verdicts(errors, floor)}
