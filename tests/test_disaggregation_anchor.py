"""DistServe in the simulator, at one rate per GPU between the two goodputs `benchmarks/disaggregation.py`
finds for each workload (docs/measured/disaggregation.md, "Anchors, DistServe").

- Its motivating example (13B on A100, 512 prompt / 64 output tokens, TTFT ≤ 0.4 s, TPOT ≤ 0.04 s): the
  papers' co-located baseline (vLLM v0's prefill-only steps) misses the 90% attainment there while 2
  prefill + 1 decode GPUs hold it, as the paper reports (1.6 vs 3.3 requests/s per GPU).
- Its chatbot at 13B (ShareGPT lengths, TTFT ≤ 0.25 s, TPOT ≤ 0.1 s): the direction the paper reports
  (DistServe's prefill TP2 + decode TP1 ahead of vLLM on one GPU) is NOT reproduced; the baseline holds
  a rate per GPU that DistServe's placement misses, its one decode GPU's KV pool filling (TPOT binds).
  Should this flip, that verdict is to be revisited.
"""

from benchmarks.disaggregation import attainment
from benchmarks.disaggregation_workloads import V0, WORKLOADS, _split
from simulator.planner.split import Layout

FIG1 = WORKLOADS["DistServe Fig. 1 (13B, 512 in / 64 out)"]
RATE_PER_GPU = 7.0  # the benchmark: co-located v0 5.1, 2P1D 8.75 requests/s per GPU
CHATBOT = WORKLOADS["DistServe chatbot 13B (Llama-2-13B, ShareGPT)"]
CHATBOT_RATE_PER_GPU = (
    2.0  # the benchmark: co-located v0 2.75, prefill TP2 + decode TP1 1.19 per GPU
)
ONE_GPU = Layout("colocated", 0, replicas=1, tensor_parallel=1)


def test_split_holds_a_rate_per_gpu_the_colocated_baseline_misses():
    colocated = attainment(FIG1, ONE_GPU, RATE_PER_GPU, 60.0, V0[1])
    split = attainment(FIG1, _split(2, 1, 1), 3 * RATE_PER_GPU, 60.0, {})
    assert colocated < 0.9 <= split, (colocated, split)


def test_chatbot_13b_the_colocated_baseline_holds_a_rate_per_gpu_distserves_placement_misses():
    colocated = attainment(CHATBOT, ONE_GPU, CHATBOT_RATE_PER_GPU, 60.0, V0[1])
    split = attainment(CHATBOT, _split(1, 1, 2, 1), 3 * CHATBOT_RATE_PER_GPU, 60.0, {})
    assert split < 0.9 <= colocated, (colocated, split)
