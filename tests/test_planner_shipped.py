"""The planner's answers on the shipped scenarios stay what they were before the speed work of issue 19
(throughput-ceiling floors, guesses, parallel replicas with a stale router): the recommendation of
`examples/scenarios/spike-llama-2-7b-a100.yaml` (7 x A100-80GB, max_num_seqs 256, 8192 batched
tokens) and of the dashboard's default `plan-spike-llama-2-7b.yaml` over A100/H100/H200/L40S (3 x
H100-80GB, same batch settings), as the tree before it (f9fc16f) answered them. The `answer` profile
(the recommendation confirmed in full with one replica less, no comparisons) keeps the test short; the
floors also must never exceed a confirmed answer."""

from pathlib import Path

import pytest

from simulator.planner.ceiling import peak_rate_per_s, replica_floor
from simulator.planner.recommend import plan
from simulator.planner.spec import ANSWER_ONLY, PlanSettings, load_plan
from simulator.simulation import load_traffic

SCENARIOS = Path(__file__).resolve().parents[1] / "examples" / "scenarios"
GPUS = [{"gpu": "A100-80GB"}, {"gpu": "H100-80GB"}, {"gpu": "H200-141GB"}, {"gpu": "L40S"}]
BEFORE = {  # (file, candidates) -> (gpu, replicas, max_num_seqs, max_num_batched_tokens)
    ("spike-llama-2-7b-a100.yaml", None): ("A100-80GB", 7, 256, 8192),
    ("plan-spike-llama-2-7b.yaml", "4 GPUs"): ("H100-80GB", 3, 256, 8192),
}


@pytest.mark.timeout(400)
@pytest.mark.parametrize("name, candidates", list(BEFORE))
def test_recommendation_on_shipped_scenarios_is_unchanged(name, candidates):
    scenario, settings = load_plan(SCENARIOS / name)
    update = dict(ANSWER_ONLY)
    if candidates:
        update["candidates"] = PlanSettings(candidates=GPUS).candidates
    result = plan(scenario, settings.model_copy(update=update), workers=1, progress=False)
    rec = result.report.recommendation
    assert (rec.gpu, rec.replicas, rec.max_num_seqs, rec.max_num_batched_tokens) == BEFORE[
        (name, candidates)
    ]


def test_floor_is_below_the_confirmed_answer_and_the_peak_is_the_busiest_minute():
    scenario, _ = load_plan(SCENARIOS / "spike-llama-2-7b-a100.yaml")
    trace = load_traffic(scenario)
    assert 1 <= replica_floor(scenario, trace) < 7
    assert replica_floor(scenario, trace, step_scale=2.0) >= replica_floor(scenario, trace)
    assert peak_rate_per_s([0.0, 1.0, 2.0, 100.0], window_s=10.0) == pytest.approx(0.3)
