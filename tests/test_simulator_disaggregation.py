"""The disaggregated simulator: a prefill pool and a decode pool on the engine's scheduler roles, the KV
moved over a catalog link. The transfer model is checked against a hand computation for one request;
the example scenario runs with per-pool series and transfer figures; co-located runs report no transfer."""

import pytest

from engine.core.step_shape import StepShape
from simulator import Scenario, simulate
from simulator.cluster.disaggregated import DisaggregatedCluster, PoolConfig
from simulator.links import LINKS, get_link
from tests.sim_helpers import cluster_config, cost_model, pool_config

EXAMPLE = "examples/scenarios/disaggregated-llama-3-70b-h100.yaml"


def _pool(name: str, model, tensor_parallel: int, num_blocks: int = 256) -> PoolConfig:
    return pool_config(name, model, tensor_parallel=tensor_parallel, num_blocks=num_blocks)


def test_one_request_matches_a_hand_computation():
    model = cost_model(0.01, 1e-5, 1e-7)
    link = get_link("infiniband-ndr")
    prompt, output, kv_bytes_per_token = 300, 5, 327_680  # Llama-3-70B bf16: 2 x 80 x 8 x 128 x 2
    cluster = DisaggregatedCluster(
        cluster_config(model, replicas=0),
        _pool("prefill", model, 2),
        _pool("decode", model, 4),
        link,
        kv_bytes_per_token,
        [1.0],
        [prompt],
        [output],
        ["default"],
    )
    end = cluster.run()
    # by hand: the prefill step of 300 tokens, then 300 x 327,680 B = 98.3 MB over min(2, 4) = 2 NDR links
    # (50 GB/s each, 20 us set-up), then 4 decode steps of contexts 301..304
    prefill_s = 0.01 + 300 * 1e-5
    transfer_s = 20e-6 + 300 * 327_680 / (50e9 * 2)
    assert transfer_s == pytest.approx(0.00100304)
    decodes_s = sum(0.01 + 1e-5 + ctx * 1e-7 for ctx in range(301, 305))
    assert model.step_time(StepShape(((300, 0),), ())) == pytest.approx(prefill_s)
    record = cluster.records[0]
    assert record.status == "ok" and record.output_tokens == output
    assert record.ttft_s == pytest.approx(prefill_s)
    assert record.e2e_s == pytest.approx(prefill_s + transfer_s + decodes_s)
    assert cluster.transfer_bytes == [300 * 327_680] and cluster.transfer_s == [
        pytest.approx(transfer_s)
    ]
    assert end == pytest.approx(1.0 + prefill_s + transfer_s + decodes_s)
    for pool in cluster.pools.values():  # every block back in both pools
        assert all(r.scheduler.block_manager.num_used_blocks == 0 for r in pool.replicas)


def test_decode_pool_back_pressure_and_preemption_finish_every_request():
    model = cost_model(0.01, 1e-5, 1e-7)
    n = 40
    cluster = DisaggregatedCluster(
        cluster_config(model, replicas=0),
        _pool("prefill", model, 1, num_blocks=64),
        _pool("decode", model, 1, num_blocks=48),
        get_link("ethernet-100g"),
        1_000_000,
        [0.01 * i for i in range(n)],
        [100 + 7 * i for i in range(n)],
        [30 + i for i in range(n)],
        ["default"] * n,
    )
    cluster.run()
    assert all(r.status == "ok" for r in cluster.records)
    assert [r.output_tokens for r in cluster.records] == [30 + i for i in range(n)]
    decode = cluster.pools["decode"].replicas[0].scheduler
    assert decode.num_preemptions > 0  # a full decode pool recomputes, as co-located
    assert len(cluster.transfer_bytes) == n and max(cluster.transfer_wait_s) > 0


def test_link_catalog_is_labelled():
    assert {link.kind for link in LINKS.values()} == {"nvlink", "pcie", "infiniband", "ethernet"}
    assert all(link.source and link.label == "nominal" for link in LINKS.values())
    with pytest.raises(ValueError, match="expected one of"):
        get_link("carrier-pigeon")


def test_example_runs_disaggregated_and_colocated(tmp_path):
    scenario = Scenario.load(EXAMPLE)
    short = scenario.model_copy(
        update={
            "traffic": scenario.traffic.model_copy(update={"duration_s": 60.0}),
            "horizon_s": None,
        }
    )
    result = simulate(short)
    summary = result.summary
    assert (
        summary["completed"] == summary["requests"]
        and summary["kv_transfers"] == summary["requests"]
    )
    assert (
        summary["kv_transfer_bytes"] > 0
        and 0 < summary["kv_transfer_mean_s"] <= summary["kv_transfer_p99_s"]
    )
    assert set(result.pools) == {"prefill", "decode"} and all(result.pools.values())
    assert {row["pool"] for row in result.replicas} == {"prefill", "decode"}
    assert result.facts["disaggregation"]["link_source"].startswith("NVIDIA ConnectX-7")
    written = {path.name for path in result.write(tmp_path)}
    assert {"timeseries-prefill.csv", "timeseries-decode.csv"} <= written
    colocated = short.model_copy(
        update={"cluster": short.cluster.model_copy(update={"disaggregation": None, "replicas": 4})}
    )
    plain = simulate(colocated).summary
    assert plain["kv_transfer_bytes"] == 0 and plain["kv_transfer_mean_s"] is None
    assert plain["completed"] == summary["completed"]


def _two_at_once(link_name: str, kv_bytes_per_token: int, prompts: list[int]):
    """Requests arriving together at one prefill replica, handed to two decode replicas."""
    model = cost_model(0.01, 1e-5, 1e-7)
    decode = _pool("decode", model, 1)
    decode = PoolConfig(**{**decode.__dict__, "initial_replicas": 2})
    cluster = DisaggregatedCluster(
        cluster_config(model, replicas=0),
        _pool("prefill", model, 1),
        decode,
        get_link(link_name),
        kv_bytes_per_token,
        [1.0] * len(prompts),
        prompts,
        [3] * len(prompts),
        ["default"] * len(prompts),
    )
    cluster.run()
    return cluster


def test_transfers_from_one_prefill_replica_share_its_link():
    # two prompts prefilled in one step, handed over at the same instant to two decode replicas (round
    # robin): by hand, 100 GbE (12.5 GB/s, 50 us): the 100-token KV (1 MB a token: 100 MB) and the
    # 300-token one (300 MB) share the link, so the first ends after 2 x 100 MB / 12.5 GB/s = 16 ms and
    # the second after 16 ms + 200 MB / 12.5 GB/s = 32 ms, each + 50 us; alone they would take 8 and 24 ms
    cluster = _two_at_once("ethernet-100g", 1_000_000, [100, 300])
    assert sorted(cluster.transfer_s) == [
        pytest.approx(50e-6 + 2 * 100e6 / 12.5e9),
        pytest.approx(50e-6 + (2 * 100e6 + 200e6) / 12.5e9),
    ]
    assert cluster.transfer_wait_s == [0.0, 0.0]  # two decode replicas: no queue on their side
    prefill = cluster.pools["prefill"].replicas[0]
    assert prefill.link_out.peak_concurrent == 2 and prefill.link_out.in_flight == 0
    assert all(r.status == "ok" and r.output_tokens == 3 for r in cluster.records)


def test_shared_link_alone_matches_the_catalog_formula():
    import simpy

    from simulator.cluster.shared_link import SharedLink

    env, link = simpy.Environment(), get_link("pcie-gen4-x16")
    shared = SharedLink(env, link.bandwidth_bytes_per_s * 2)
    ends = []

    def one(start_s, num_bytes):
        yield env.timeout(start_s)
        yield shared.send(num_bytes)
        ends.append(env.now)

    env.process(one(0.0, 64e6))  # alone: 64 MB over 2 x 32 GB/s = 1 ms
    env.process(one(1.0, 64e6))  # joined 0.5 ms later by a second: both share from then on
    env.process(one(1.0005, 64e6))
    env.run()
    assert ends[0] == pytest.approx(link.transfer_s(64e6, 2, 4) - link.latency_s)
    # by hand: the second has 32 MB left at 1.0005 s, then both move at 32 GB/s: it ends 1 ms later,
    # the third (32 MB left then) alone at 64 GB/s after 0.5 ms more
    assert ends[1:] == [pytest.approx(1.0015), pytest.approx(1.002)]


def test_kv_transfer_bytes_follow_the_kv_cache_dtype():
    base = Scenario.load(EXAMPLE)
    runs = {}
    for dtype in ("auto", "fp8"):
        scenario = base.model_copy(
            update={
                "traffic": base.traffic.model_copy(update={"duration_s": 20.0}),
                "scheduler": base.scheduler.model_copy(update={"kv_cache_dtype": dtype}),
            }
        )
        runs[dtype] = simulate(scenario)
    auto, fp8 = (runs[d].facts["disaggregation"]["kv_bytes_per_token"] for d in ("auto", "fp8"))
    assert auto == 2 * 80 * 8 * 128 * 2 and fp8 == auto // 2  # Llama-3-70B: bf16, then 1 byte
    assert runs["fp8"].summary["kv_transfer_bytes"] * 2 == pytest.approx(
        runs["auto"].summary["kv_transfer_bytes"], rel=0.05
    )


def _one_request_split(
    prefill_gpu: str | None, decode_gpu: str | None, decode: dict | None = None, **extra
):
    """One 1,000-token prompt with 4 output tokens, Llama-2-70B TP4 in each pool, over InfiniBand HDR."""
    pools = {
        name: {"gpu": gpu}
        for name, gpu in (("prefill", prefill_gpu), ("decode", decode_gpu))
        if gpu is not None
    }
    if decode:
        pools["decode"] = {**pools.get("decode", {}), **decode}
    return simulate(
        Scenario.model_validate(
            {
                "traffic": {
                    "arrivals": {"kind": "constant", "rate_per_s": 1.0},
                    "duration_s": 1.0,
                    "prompt": {"kind": "fixed", "tokens": 1000},
                    "output": {"kind": "fixed", "tokens": 4},
                },
                "model": {"name": "llama-2-70b"},
                "hardware": {"gpu": "A100-80GB", "tensor_parallel": 4},
                "cluster": {"disaggregation": {"link": "infiniband-hdr", **pools}},
                **extra,
            }
        )
    )


def test_heterogeneous_pools_step_on_their_own_gpus_and_cost_their_own_prices():
    # Splitwise-HA: prompts on H100s, tokens on A100s. By hand, one request: its prefill takes the
    # H100 calibration's step time, its KV 1,000 x 327,680 B over min(4, 4) HDR links, then 3 decode
    # steps (contexts 1001..1003) at the A100 calibration's step times; each pool's GPU-hours at its
    # GPU's catalog price
    from simulator.calibration.engine_profile import load_profile
    from simulator.calibration.profiled_cost_model import ProfiledCostModel
    from simulator.calibration.shipped import calibration_for
    from simulator.hardware.catalog import get_hardware

    result = _one_request_split("H100-80GB", None)
    facts = result.facts["disaggregation"]
    assert (facts["prefill_gpu"], facts["decode_gpu"]) == ("H100-80GB", "A100-80GB")
    profile = load_profile(result.facts["calibration"]["engine_profile"])
    h100, a100 = (
        ProfiledCostModel.of_calibration(calibration_for("llama-2-70b", gpu, 4), profile)
        for gpu in ("H100-80GB", "A100-80GB")
    )
    prefill_s = h100.step_time(StepShape(((1000, 0),), ()))
    transfer_s = 20e-6 + 1000 * 327_680 / (25e9 * 4)
    decodes_s = sum(a100.step_time(StepShape((), (ctx,))) for ctx in range(1001, 1004))
    slower = ProfiledCostModel.of_calibration(
        calibration_for("llama-2-70b", "A100-80GB", 4), profile
    )
    assert slower.step_time(StepShape(((1000, 0),), ())) > 2 * prefill_s  # the GPUs differ
    record = result.records[0]
    assert record.ttft_s == pytest.approx(prefill_s, rel=1e-9)
    assert record.e2e_s == pytest.approx(prefill_s + transfer_s + decodes_s, rel=1e-9)
    end_s = result.summary["simulated_s"]
    prices = {gpu: get_hardware(gpu).price_usd_per_hour for gpu in ("H100-80GB", "A100-80GB")}
    assert (facts["prefill_price_usd_per_gpu_hour"], facts["decode_price_usd_per_gpu_hour"]) == (
        prices["H100-80GB"],
        prices["A100-80GB"],
    )
    pool_costs = [4 * end_s / 3600 * prices[gpu] for gpu in ("H100-80GB", "A100-80GB")]
    assert result.summary["gpu_hours"] == pytest.approx(8 * end_s / 3600)
    assert result.summary["cost_usd"] == pytest.approx(sum(pool_costs))
    assert [result.pools[name][-1]["cost_usd"] for name in ("prefill", "decode")] == [
        pytest.approx(cost) for cost in pool_costs
    ]
    assert result.timeseries[-1]["cost_usd"] == pytest.approx(sum(pool_costs))
    # a price override is the scenario GPU's (A100) only: the H100 prefill pool keeps its catalog price
    priced = _one_request_split("H100-80GB", None, prices={"gpu_usd_per_hour": 1.0})
    pools = priced.facts["disaggregation"]
    assert (pools["prefill_price_usd_per_gpu_hour"], pools["decode_price_usd_per_gpu_hour"]) == (
        prices["H100-80GB"],
        1.0,
    )
    # the same split on A100s only: the A100 prefill, and both pools at the A100 price
    same = _one_request_split(None, None)
    assert same.records[0].ttft_s == pytest.approx(
        slower.step_time(StepShape(((1000, 0),), ())), rel=1e-9
    )
    assert same.summary["cost_usd"] == pytest.approx(
        same.summary["gpu_hours"] * prices["A100-80GB"]
    )


def test_pool_gpu_must_be_in_the_catalog():
    with pytest.raises(ValueError, match="expected one of"):
        Scenario.model_validate({"cluster": {"disaggregation": {"decode": {"gpu": "Voodoo-5"}}}})


def test_a_pool_steps_with_the_calibration_named_for_it(tmp_path):
    # the decode pool on a roofline-derived A100 calibration (a file): its decode steps are that
    # model's; a calibration of another GPU is refused, naming the setting
    from simulator.calibration.engine_profile import load_profile
    from simulator.calibration.profiled_cost_model import ProfiledCostModel
    from simulator.calibration.roofline import roofline_calibration
    from simulator.calibration.shipped import calibration_for
    from simulator.hardware.catalog import get_hardware
    from simulator.model_spec import ModelSpec

    spec = ModelSpec.from_preset("llama-2-70b")
    path = roofline_calibration(spec, get_hardware("A100-80GB"), 4).save(tmp_path / "a100.json")
    result = _one_request_split("H100-80GB", None, decode={"calibration": str(path)})
    profile = load_profile(result.facts["calibration"]["engine_profile"])
    h100 = ProfiledCostModel.of_calibration(calibration_for("llama-2-70b", "H100-80GB", 4), profile)
    roofline = ProfiledCostModel.of_calibration(
        roofline_calibration(spec, get_hardware("A100-80GB"), 4), profile
    )
    prefill_s = h100.step_time(StepShape(((1000, 0),), ()))
    transfer_s = 20e-6 + 1000 * 327_680 / (25e9 * 4)
    decodes_s = sum(roofline.step_time(StepShape((), (ctx,))) for ctx in range(1001, 1004))
    assert result.records[0].e2e_s == pytest.approx(prefill_s + transfer_s + decodes_s, rel=1e-9)
    h100_file = roofline_calibration(spec, get_hardware("H100-80GB"), 4).save(tmp_path / "h.json")
    with pytest.raises(ValueError, match="decode.calibration"):
        _one_request_split("H100-80GB", None, decode={"calibration": str(h100_file)})
