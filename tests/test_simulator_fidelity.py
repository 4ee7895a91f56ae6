"""The proof that the simulator schedules exactly as the engine does: the same requests through
`LLMEngine` (cpu-small, dummy weights, its clock advanced by the cost model) and through one simulated
replica with that cost model give the identical sequence of step shapes, preemptions, per-request token
counts and timings."""

import numpy as np
import pytest
from sim_helpers import cluster_config, cost_model, run_cluster

from engine import LLM, SamplingParams
from engine.core.scheduler_output import SchedulerOutput


class CostClock:
    """The engine's clock, advanced by the cost model's time for each step the model runner executes."""

    def __init__(self, engine, model):
        self.now_s, self.shapes = 0.0, []
        runner, execute = engine.model_runner, engine.model_runner.execute

        def timed_execute(scheduled):
            shape = SchedulerOutput(scheduled=list(scheduled)).shape
            result = execute(scheduled)
            self.shapes.append(shape)
            self.now_s += model.step_time(shape)
            return result

        runner.execute = timed_execute
        engine.clock = lambda: self.now_s


@pytest.mark.parametrize("num_blocks,expect_preemptions", [(40, True), (400, False)])
def test_engine_and_simulated_replica_schedule_identically(num_blocks, expect_preemptions):
    rng = np.random.default_rng(5)
    n = 24
    prompts = rng.integers(8, 120, n)
    outputs = rng.integers(2, 40, n)
    settings = dict(
        block_size=16,
        num_kv_blocks=num_blocks,
        max_num_seqs=8,
        max_num_batched_tokens=96,
        max_model_len=256,
    )
    model = cost_model(0.004, 2e-5, 3e-7)

    llm = LLM("cpu-small", load_format="dummy", enable_prefix_caching=False, **settings)
    engine = llm.engine
    clock = CostClock(engine, model)
    vocab = engine.model_config.vocab_size
    for i in range(n):
        engine.add_request(
            str(i),
            rng.integers(3, vocab, int(prompts[i])).tolist(),
            SamplingParams(temperature=0, max_tokens=int(outputs[i]), ignore_eos=True),
            arrival_time=0.0,
        )
    finished, kv_weighted = {}, 0.0
    while engine.has_unfinished_requests():
        before_s = clock.now_s
        for output in engine.step():
            if output.finished:
                finished[int(output.request_id)] = output
        kv_weighted += engine.kv_stats().utilization * (
            clock.now_s - before_s
        )  # as LiveEngine.run measures it

    config = cluster_config(
        model,
        num_blocks=num_blocks,
        block_size=16,
        max_num_seqs=8,
        max_num_batched_tokens=96,
        max_model_len=256,
    )
    from simulator.cluster.cluster import Cluster

    cluster = Cluster(config, [0.0] * n, prompts.tolist(), outputs.tolist(), ["default"] * n)
    cluster.replicas[0].step_shapes = []
    cluster.run()
    replica = cluster.replicas[0]

    assert replica.step_shapes == clock.shapes
    assert replica.busy_s == pytest.approx(clock.now_s, rel=1e-9)
    # KV utilisation, the live engine's measure (a decode stretch is weighed by its start and end states)
    live_utilization = kv_weighted / clock.now_s
    assert cluster.monitor.kv_utilization == pytest.approx(live_utilization, abs=0.003)
    assert replica.scheduler.num_preemptions == engine.scheduler.num_preemptions
    assert (engine.scheduler.num_preemptions > 0) == expect_preemptions
    for i, record in enumerate(cluster.records):
        live = finished[i]
        assert record.status == "ok"
        assert record.output_tokens == len(live.output_token_ids) == outputs[i]
        assert record.num_preemptions == live.num_preemptions
        assert record.ttft_s == pytest.approx(live.metrics.ttft, rel=1e-9, abs=1e-12)
        assert record.e2e_s == pytest.approx(live.metrics.e2e_latency, rel=1e-9, abs=1e-12)


def test_stretches_give_the_per_request_results_of_stepping():
    """Advancing decode stretches at once must not change a single per-request figure."""
    rng = np.random.default_rng(11)
    n = 300
    arrival = np.sort(rng.uniform(0, 60, n))
    prompts, outputs = rng.integers(10, 400, n), rng.integers(1, 300, n)
    results = []
    for stretch in (1, 256):
        config = cluster_config(
            num_blocks=300,
            max_num_seqs=24,
            max_num_batched_tokens=256,
            replicas=2,
            max_stretch_steps=stretch,
        )
        cluster, end = run_cluster(config, arrival, prompts, outputs)
        results.append(
            (
                [
                    (
                        r.status,
                        r.output_tokens,
                        r.num_preemptions,
                        r.replica,
                        round(r.ttft_s, 9),
                        round(r.e2e_s, 9),
                    )
                    for r in cluster.records
                ],
                round(end, 9),
                sum(rep.scheduler.block_manager.num_allocations for rep in cluster.replicas),
            )
        )
    stepped, stretched = results
    assert stepped == stretched
