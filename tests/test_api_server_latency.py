"""The engine profile's per-request API-server term (`request`): each request reaches the scheduler
that long after its client sent it, TTFT and E2E move by exactly that, TPOT and every step do not;
a client timeout meanwhile ends it without the scheduler ever seeing it; offline published sets
(`api_server` false) replay without it; the fit reads first-token rows for it."""

import json
import random

import pytest
from sim_helpers import cluster_config, cost_model, host_profile

from engine.core.step_shape import StepShape
from simulator.calibration.engine_profile import load_profile
from simulator.calibration.profiled_cost_model import ProfiledCostModel
from simulator.cluster.cluster import Cluster
from simulator.validation.fit_coordinates import TERM_METRICS
from simulator.validation.published_replay import source_profile
from simulator.validation.published_sets import load_published, published_names

ARRIVALS = [0.0, 0.0, 0.013, 0.05, 0.2, 0.2]
PROMPTS = [40, 90, 20, 300, 60, 10]
OUTPUTS = [12, 5, 30, 8, 1, 20]


def run(
    front_end_s: float, arrivals=ARRIVALS, prompts=PROMPTS, outputs=OUTPUTS, **config
) -> Cluster:
    profile = host_profile(0.5, step_s=0.002)
    if front_end_s:
        profile = profile.with_terms({"request": front_end_s}, "derived", "test")
    model = ProfiledCostModel(cost_model(0.004, 2e-5, 3e-7), profile)
    cluster = Cluster(
        cluster_config(model, max_num_batched_tokens=128, **config),
        list(arrivals),
        list(prompts),
        list(outputs),
        ["default"] * len(arrivals),
    )
    cluster.run()
    return cluster


def test_each_request_reaches_the_scheduler_that_long_after_it_was_sent():
    rng = random.Random()  # fresh requests each run
    n = rng.randint(5, 40)
    arrivals = sorted(rng.uniform(0.0, 0.5) for _ in range(n))
    prompts = [rng.randint(1, 300) for _ in range(n)]
    outputs = [rng.randint(1, 40) for _ in range(n)]
    front_end_s = rng.uniform(0.001, 0.05)
    plain = run(0.0, arrivals, prompts, outputs)
    served = run(front_end_s, arrivals, prompts, outputs)
    # every request's whole life shifts by the API server's time: its arrivals all do, so the
    # engine sees the same requests at the same gaps and times the same steps
    assert served.replicas[0].front_end_s == pytest.approx(front_end_s)
    assert [r.ttft_s for r in served.records] == pytest.approx(
        [r.ttft_s + front_end_s for r in plain.records], abs=1e-9
    )
    assert [r.e2e_s for r in served.records] == pytest.approx(
        [r.e2e_s + front_end_s for r in plain.records], abs=1e-9
    )
    assert [r.tpot_s for r in served.records] == pytest.approx(
        [r.tpot_s for r in plain.records], abs=1e-12, nan_ok=True
    )
    assert served.replicas[0].busy_s == pytest.approx(plain.replicas[0].busy_s)
    assert all(r.status == "ok" for r in served.records)


def test_the_term_is_not_paid_per_step():
    profile = host_profile(0.0).with_terms({"request": 0.5}, "derived", "test")
    shape = StepShape(decode_context_lens=(100,) * 10)
    assert profile.request_s == pytest.approx(0.5)
    assert profile.host_s(shape) == pytest.approx(host_profile(0.0).host_s(shape))
    assert profile.offline().request_s == 0.0
    assert profile.offline().host_s(shape) == pytest.approx(profile.host_s(shape))


def test_a_client_that_gives_up_in_the_api_server_never_reaches_the_scheduler():
    cluster = run(0.5, ttft_timeout_s=0.1, max_retries=0)
    assert all(r.status == "timeout" for r in cluster.records)
    assert cluster.replicas[0].scheduler.num_unfinished_requests == 0
    assert cluster.replicas[0].num_steps == 0


def test_a_router_counts_the_requests_still_in_a_replicas_api_server():
    # a burst at once: without counting them, least-outstanding would send all six to the first
    # replica (every scheduler still empty); a replica draining meanwhile serves what it was sent
    cluster = Cluster(
        cluster_config(
            ProfiledCostModel(
                cost_model(0.004),
                host_profile(0.5).with_terms({"request": 0.02}, "derived", "test"),
            ),
            replicas=3,
            router_policy="least_outstanding",
        ),
        [0.0] * 6,
        [30] * 6,
        [4] * 6,
        ["default"] * 6,
    )
    cluster.env.timeout(0.01).callbacks.append(lambda _event: cluster.replicas[2].drain())
    cluster.run()
    assert sorted(r.replica for r in cluster.records) == [0, 0, 1, 1, 2, 2]
    assert all(r.status == "ok" for r in cluster.records)
    assert all(replica.num_outstanding == 0 for replica in cluster.replicas)


def test_offline_sets_replay_without_the_api_server():
    profile = load_profile("trtllm").with_terms({"request": 0.02}, "derived", "test")
    names = published_names()
    served = [name for name in names if load_published(name)["api_server"]]
    offline = [name for name in names if not load_published(name)["api_server"]]
    assert served and offline
    for name in served:
        assert source_profile(load_published(name), profile).request_s == pytest.approx(0.02)
    for name in offline:
        assert source_profile(load_published(name), profile).request_s == 0.0


def test_a_set_must_say_whether_it_was_served(tmp_path):
    data = load_published("trtllm-perf-a100")
    del data["api_server"]
    path = tmp_path / "unsaid.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="api_server is None; expected true"):
        load_published(path)


def test_the_request_term_is_fitted_on_first_token_rows():
    assert TERM_METRICS["request"] == ("ttft_mean_s",)
    data = load_published("aic-silicon-trtllm-70b")
    # the set's own fit rows stay its TPOT (its fp8 scale's); the term reads its first tokens
    assert "request" in data["fit_terms"] and data["fit_metrics"] == ["tpot_mean_s"]


def test_the_trtllm_profile_carries_its_fitted_api_server_time():
    term = next(t for t in load_profile("trtllm").terms if t.feature == "request")
    assert term.label == "fitted" and 0.001 <= term.seconds_per_unit <= 0.05
    assert "aic-silicon-trtllm-70b" in term.source and "first-token rows" in term.source
    # the other stacks' first tokens show no constant per request: no such term is fitted for them
    for name in ("vllm-v0", "vllm-v1", "sglang", "surgeplan"):
        assert load_profile(name).request_s == 0.0
