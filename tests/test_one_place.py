"""Each concept in one place: settings become engine configs through one function, the SLO verdict
is the SLO's own, the simulation summary and the planner's outcome are typed (with their JSON keys
kept), build errors are typed, one server launcher, and a simulated replica's step is its own
method."""

import dataclasses
import json

import pytest
import simpy
from sim_helpers import cost_model

from engine.config import EngineConfig
from engine.core.config import CacheConfig, SchedulerConfig, engine_configs
from engine.core.request import Request
from engine.core.sampling_params import SamplingParams
from engine.core.scheduler import Scheduler
from simulator.calibration.schema import EngineSettings
from simulator.cluster.replica import Replica
from simulator.errors import ModelDoesNotFit, PlanError, PoolTooSmall
from simulator.planner.evaluate import evaluate_job, invalid_reason, make_job
from simulator.planner.outcome import Outcome
from simulator.planner.spec import PlanError as SpecPlanError
from simulator.scenario import SLO, Scenario, SchedulerSettings
from simulator.simulation import build_cluster, load_traffic, simulate
from simulator.summary import SimSummary
from traces.replay import RequestRecord


def _scenario(**changes) -> Scenario:
    data = {
        "traffic": {
            "arrivals": {"kind": "poisson", "rate_per_s": 2.0},
            "duration_s": 10.0,
            "prompt": {"kind": "fixed", "tokens": 64},
            "output": {"kind": "fixed", "tokens": 8},
        },
        "model": {"name": "llama-2-7b"},
        "hardware": {"gpu": "A100-80GB"},
    }
    for key, value in changes.items():
        data[key] = {**data.get(key, {}), **value}
    return Scenario.model_validate(data)


# ---- 1. settings -> engine configs, each setting defined once
# -------------------------------------
def test_engine_configs_take_every_setting_the_settings_hold():
    settings = SchedulerSettings(
        policy="static",
        static_reserve="request",
        max_num_seqs=7,
        block_size=32,
        gpu_memory_utilization=0.5,
        tenant_block_quota={"a": 3},
    )
    cache, scheduler = engine_configs(
        settings, num_kv_blocks=99, max_model_len=1024, enable_prefix_caching=False
    )
    assert (
        scheduler.policy,
        scheduler.static_reserve,
        scheduler.max_num_seqs,
        scheduler.max_model_len,
    ) == ("static", "request", 7, 1024)
    assert (
        cache.block_size,
        cache.num_kv_blocks,
        cache.gpu_memory_utilization,
        cache.enable_prefix_caching,
        cache.tenant_block_quota,
    ) == (32, 99, 0.5, False, {"a": 3})
    with pytest.raises(KeyError, match="no setting named"):
        engine_configs(settings, num_kv_blocks=1, max_model_len=2, max_num_sequences=3)


def test_the_same_settings_give_the_same_configs_to_engine_simulator_and_validation():
    engine = EngineConfig(model="tiny", max_num_seqs=5, max_num_batched_tokens=300, block_size=8)
    scenario = SchedulerSettings(max_num_seqs=5, max_num_batched_tokens=300, block_size=8)
    calibration = EngineSettings(
        block_size=8, max_num_seqs=5, max_num_batched_tokens=300, max_model_len=256
    )
    built = [
        engine_configs(s, num_kv_blocks=64, max_model_len=256)
        for s in (engine, scenario, calibration)
    ]
    assert built[0] == built[1]
    assert (
        built[2][1] == built[0][1]
        and built[2][0].model_copy(update={"enable_prefix_caching": True}) == built[0][0]
    )


def test_a_scenario_reaches_the_replicas_with_static_reserve():
    scenario = _scenario(
        scheduler={"policy": "static", "static_reserve": "request", "max_model_len": 4096}
    )
    cluster, _ = build_cluster(scenario, load_traffic(scenario))
    assert cluster.replicas[0].scheduler.config.static_reserve == "request"


@pytest.mark.parametrize(
    "name", ["gpu_memory_utilization", "num_kv_blocks", "static_reserve", "block_size"]
)
def test_each_setting_has_one_definition(name):
    owner = CacheConfig if name in CacheConfig.model_fields else SchedulerConfig
    source = owner.model_fields[name]
    for config in (EngineConfig, SchedulerSettings):
        field = config.model_fields[name]
        assert field.metadata == source.metadata
        assert field.description == source.description


# ---- 2. the SLO verdict --------------------------------------------------------------------------
def _record(ttft_s, tpot_s, status="ok") -> RequestRecord:
    """A request with 2 output tokens: its TPOT is its E2E less its TTFT."""
    e2e_s = None if ttft_s is None else ttft_s + tpot_s
    return RequestRecord(
        index=0,
        tenant="default",
        arrival_s=0.0,
        prompt_tokens=1,
        expected_output_tokens=2,
        status=status,
        output_tokens=2,
        ttft_s=ttft_s,
        e2e_s=e2e_s,
    )


def test_slo_verdict_ratios_and_binding_term():
    slo = SLO(ttft_p99_s=1.0, tpot_p99_s=0.1, max_abandon_rate=0.1)
    records = [
        _record(0.5, 0.05),
        _record(1.5, 0.05),
        _record(0.5, 0.2),
        _record(None, None, "timeout"),
    ]
    assert slo.attainment(records) == 0.25 and slo.attainment([]) == 1.0
    assert slo.late(1.5, None) == (True, False)
    summary = SimpleSummary(
        ttft_p99_s=1.5, tpot_p99_s=0.05, abandon_rate=0.05, slo_attainment=0.25, in_flight=0
    )
    ratios = slo.ratios(summary, goodput_share=0.5)
    assert ratios == pytest.approx(
        {"slo_ttft": 1.5, "slo_tpot": 0.5, "timeouts": 0.5, "goodput": 1.5}
    )
    assert SLO.missed(ratios) == ["slo_ttft", "goodput"] and not slo.verdict(summary)
    assert SLO.binding(ratios, among=["slo_tpot", "timeouts"]) == "slo_tpot"
    assert slo.ratios(dataclasses.replace(summary, ttft_p99_s=None))["slo_ttft"] > 1
    assert slo.ratios(dataclasses.replace(summary, in_flight=1))["timeouts"] > 1


@dataclasses.dataclass
class SimpleSummary:
    ttft_p99_s: float | None
    tpot_p99_s: float | None
    abandon_rate: float
    slo_attainment: float
    in_flight: int


def test_the_summary_and_the_planner_judge_alike():
    scenario = _scenario(slo={"ttft_p99_s": 0.05})
    result = simulate(scenario)
    outcome = evaluate_job(make_job(scenario, early_stop=False))
    assert result.summary.meets_slo == scenario.slo.verdict(result.summary) == outcome.meets
    assert result.summary.slo_attainment == scenario.slo.attainment(result.records)


# ---- 3. typed results, same JSON keys ------------------------------------------------------------
SUMMARY_JSON_KEYS = {
    "requests",
    "completed",
    "timed_out",
    "rejected",
    "failed",
    "in_flight",
    "retries",
    "duration_s",
    "throughput_rps",
    "output_tokens_per_s",
    "ttft_mean_s",
    "ttft_p50_s",
    "ttft_p99_s",
    "tpot_mean_s",
    "tpot_p50_s",
    "tpot_p99_s",
    "e2e_mean_s",
    "e2e_p50_s",
    "e2e_p99_s",
    "queue_mean_s",
    "queue_p99_s",
    "preemptions",
    "kv_utilization",
    "kv_usage_peak",
    "block_allocations",
    "prefix_hit_rate",
    "abandon_rate",
    "slo_attainment",
    "meets_slo",
    "replicas_peak",
    "gpu_hours",
    "cost_usd",
    "cost_per_request_usd",
    "cost_per_million_output_tokens_usd",
    "simulated_s",
}


def test_summary_is_typed_and_written_with_its_keys(tmp_path):
    result = simulate(_scenario())
    assert isinstance(result.summary, SimSummary)
    assert set(result.summary.as_dict()) >= SUMMARY_JSON_KEYS
    assert result.summary["ttft_p99_s"] == result.summary.ttft_p99_s  # the old reads still work
    with pytest.raises(KeyError):
        result.summary["ttft_p99"]
    result.write(tmp_path)
    written = json.loads((tmp_path / "timeseries.json").read_text())
    assert written["summary"] == result.summary.as_dict()
    assert set(written["tenants"]["default"]) >= SUMMARY_JSON_KEYS - {
        "kv_utilization",
        "kv_usage_peak",
        "block_allocations",
        "prefix_hit_rate",
        "meets_slo",
        "replicas_peak",
        "gpu_hours",
        "cost_usd",
        "cost_per_request_usd",
        "cost_per_million_output_tokens_usd",
        "simulated_s",
    }


def test_outcome_is_typed_and_round_trips_through_json():
    outcome = evaluate_job(make_job(_scenario(), early_stop=False))
    assert isinstance(outcome, Outcome) and outcome.summary.requests > 0
    data = json.loads(json.dumps(outcome.to_json()))
    assert {
        "key",
        "share",
        "share_replicas",
        "step_scale",
        "early_stop_s",
        "status",
        "meets",
        "reasons",
        "binding",
        "error",
        "ratios",
        "summary",
        "tenants",
        "facts",
        "cpu_s",
    } == set(data)
    assert Outcome.from_json(data) == outcome


# ---- 4. typed errors -----------------------------------------------------------------------------
def test_build_errors_are_typed_and_classified_by_type():
    too_big = _scenario(
        model={"name": "llama-2-70b"}, hardware={"gpu": "A100-80GB", "tensor_parallel": 1}
    )
    with pytest.raises(ModelDoesNotFit):
        build_cluster(too_big, load_traffic(too_big))
    tiny_pool = _scenario(scheduler={"num_kv_blocks": 2})
    with pytest.raises(PoolTooSmall):
        build_cluster(tiny_pool, load_traffic(tiny_pool))
    assert [evaluate_job(make_job(s)).binding for s in (too_big, tiny_pool)] == [
        "does_not_fit",
        "kv_capacity",
    ]
    # the words no longer matter, the type does
    assert invalid_reason(ValueError("does not fit")) == "invalid"
    assert invalid_reason(PoolTooSmall("anything")) == "kv_capacity"
    assert PlanError is SpecPlanError and issubclass(ModelDoesNotFit, ValueError)


# ---- 6. a replica's step -------------------------------------------------------------------------
def test_replica_step_is_schedule_time_update():
    env = simpy.Environment()
    scheduler = Scheduler(
        SchedulerConfig(max_num_seqs=4, max_num_batched_tokens=256, max_model_len=512),
        CacheConfig(block_size=16, num_kv_blocks=64, enable_prefix_caching=False),
    )
    model = cost_model(0.01, 1e-4)
    replica = Replica(
        env,
        0,
        scheduler,
        model,
        ready_at_s=1e9,
        on_progress=lambda request: None,
        next_observation_s=lambda now: float("inf"),
    )  # run() waits out its cold start
    replica.step_shapes = []
    idle = env.process(replica.step())
    env.run(until=idle)
    assert idle.value is False and env.now == 0.0  # nothing to do: no time passes
    request = Request("a", list(range(3, 43)), SamplingParams(max_tokens=3, ignore_eos=True), 0.0)
    replica.add_request(request)
    stepped = env.process(replica.step())
    env.run(until=stepped)
    assert stepped.value is True and replica.num_steps == 1
    assert env.now == pytest.approx(model.step_time(replica.step_shapes[0]))
    assert request.num_computed_tokens == 40 and len(request.output_token_ids) == 1
