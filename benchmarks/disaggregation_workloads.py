"""The DistServe-style goodput workloads `benchmarks/disaggregation.py` runs, and the layouts each is run on
(the papers' settings where we have them; what differs is said; published figures with sources in
benchmarks/data/disaggregation_published.csv).

- DistServe Fig. 1, its motivating example: a 13B model on one A100, 512-token prompts, 64 output
  tokens, TTFT ≤ 0.4 s, TPOT ≤ 0.04 s. Published: co-located vLLM 1.6 req/s per GPU, 2 prefill GPUs +
  1 decode GPU 10 req/s = 3.3 per GPU (2.1x). Here Llama-2-13B (OPT-13B's size and shape: 40 layers,
  hidden 5120, multi-head attention) on a roofline-derived A100 calibration (no measured 13B table).
- DistServe's chatbot (§6.2, Fig. 8 top row): ShareGPT lengths (the shipped `sharegpt-2k-*` quantile
  tables: requests under 2048 tokens, DistServe's filter; Llama-2 tokenizer, not OPT's; prompt and
  output drawn independently), Poisson arrivals, ≥ 90% within both targets; SLOs and layouts from
  DistServe's artifact (LLMServe/DistServe evaluation/ae-scripts/e2e/_plot.py and
  2-start-api-server.py). Published: DistServe sustains 2.0x-4.6x vLLM's rate per GPU across
  OPT-13B/66B/175B (the paper's text gives the range, not each model's figure).
  - 13B: TTFT ≤ 0.25 s, TPOT ≤ 0.1 s; vLLM on 1 GPU vs DistServe's placement, one prefill instance at
    TP2 + one decode instance at TP1 (3 GPUs; its simulator's README finds the same). Llama-2-13B as
    above.
  - 66B: TTFT ≤ 0.4 s, TPOT ≤ 0.1 s; vLLM at TP4 vs DistServe's prefill TP4 + decode TP2 x PP2
    (8 GPUs). Here Llama-2-70B on its Vidur-fitted A100 TP4 calibration (the nearest the catalog
    has: grouped-query attention, so ~7x less KV per token than OPT-66B's multi-head attention) and,
    as the simulator has no pipeline parallelism, decode at TP4 (the same 8 GPUs).
  - 175B (TTFT ≤ 4 s, TPOT ≤ 0.2 s, 21 GPUs against vLLM's TP8): not run (no 175B calibration).
  - 13B, each system's own steps: the same, but each layout timed by the step models DistServe's
    artifact fitted on its A100 measurements of vLLM (0.2, behind Ray) and of DistServe's engine
    (`benchmarks/distserve_steps.py`): vLLM's for the baseline, DistServe's for its placement, and the
    two crossed (DistServe's engine co-located, vLLM's split) to tell the engine's share of the gap
    from the split's.
- Ours, not a paper's: Llama-2-7B (shipped Vidur-fitted A100 calibration) on the Azure code lengths
  with TTFT ≤ 1 s and TPOT ≤ 0.04 s (about three decode steps): long prompts and short answers, where a
  prefill stall is a large share of a request's TPOT.

Layouts, each workload: co-located without mixed steps (vLLM v0's scheduler, DistServe's baseline:
waiting prompts are prefilled whole in prefill-only steps, every running decode waiting:
`scheduler.mixed_steps: false`; `vs_baseline` = 1), co-located with mixed steps (vLLM v1 without
chunking), co-located with 512-token chunks (Sarathi-Serve, which DistServe did not compare against),
then xPyD splits (pools take whole prompts, up to 8192 tokens a step unless the workload says
otherwise; KV over the workload's link). The chatbot workloads add the baseline on as many GPUs as a
split (several co-located replicas behind the router): per-GPU goodput against one instance, as the
paper compares, mixes two effects, splitting the phases and serving from more queues; this row
separates them.
"""

from benchmarks.distserve_steps import artifact_kv_tokens
from simulator.planner.split import Layout

# co-located schedules: (label, scheduler changes)
V0 = ("no mixed steps (vLLM v0: the papers' baseline)", {"mixed_steps": False})
MIXED = ("mixed steps, no chunks (vLLM v1)", {"mixed_steps": True})
CHUNKED = (
    "mixed steps, 512-token chunks (Sarathi-Serve)",
    {"mixed_steps": True, "max_num_batched_tokens": 512},
)


def _split(x: int, y: int, tp: int, decode_tp: int | None = None) -> Layout:
    """x prefill replicas at TP `tp`, y decode replicas at `decode_tp` (default: `tp`)."""
    return Layout(
        "disaggregated",
        0,
        prefill_replicas=x,
        decode_replicas=y,
        prefill_tensor_parallel=tp,
        decode_tensor_parallel=tp if decode_tp is None else decode_tp,
    )


def _colocated(replicas: int, tp: int) -> list:
    layout = Layout("colocated", 0, replicas=replicas, tensor_parallel=tp)
    return [(layout, schedule) for schedule in (V0, MIXED, CHUNKED)]


SHAREGPT = dict(
    prompt={"kind": "preset", "name": "sharegpt-2k-prompt"},
    output={"kind": "preset", "name": "sharegpt-2k-output"},
    gpu="A100-80GB",
    link="nvlink-3",
    # DistServe's artifact's vLLM settings (2-start-api-server.py), for every layout here: its
    # prefill instances' 8192-token batch cap is not modelled (the pools share one scheduler setting)
    scheduler={
        "gpu_memory_utilization": 0.95,
        "max_num_seqs": 1024,
        "max_num_batched_tokens": 16384,
    },
)

FIG1 = dict(  # DistServe's motivating example
    model="llama-2-13b",
    gpu="A100-80GB",
    prompt={"kind": "fixed", "tokens": 512},
    output={"kind": "fixed", "tokens": 64},
    ttft_s=0.4,
    tpot_s=0.04,
    link="nvlink-3",
    start_rps=2.0,
    published="co-located 1.6, 2P1D 3.3 req/s per GPU (2.1x)",
)
ARTIFACT_KV_TOKENS = artifact_kv_tokens(1)  # DistServe's artifact's KV pool for OPT-13B, one A100

WORKLOADS = {
    "DistServe Fig. 1 (13B, 512 in / 64 out)": dict(
        **FIG1,
        layouts=_colocated(1, 1) + [(_split(1, 1, 1), None), (_split(2, 1, 1), None)],
    ),
    "DistServe Fig. 1, each system's own steps (DistServe artifact)": dict(
        **FIG1,
        scheduler={"num_kv_blocks": ARTIFACT_KV_TOKENS // 16},
        curve_rates_per_gpu=(1.0, 1.6, 2.5, 3.3, 4.0),
        layouts=[
            (Layout("colocated", 0, replicas=1, tensor_parallel=1), V0, "vllm"),
            (_split(2, 1, 1), None, "distserve"),
            (Layout("colocated", 0, replicas=1, tensor_parallel=1), V0, "distserve"),
            (_split(2, 1, 1), None, "vllm"),
        ],
    ),
    "DistServe chatbot 13B (Llama-2-13B, ShareGPT)": dict(
        model="llama-2-13b",
        **SHAREGPT,
        ttft_s=0.25,
        tpot_s=0.1,
        start_rps=0.5,
        published="DistServe (prefill TP2 + decode TP1) 2.0x-4.6x vLLM per GPU (13B/66B/175B)",
        layouts=_colocated(1, 1)
        + [(_split(1, 1, 1), None), (_split(1, 1, 2, 1), None), (_split(2, 1, 1), None)]
        + [(Layout("colocated", 0, replicas=3, tensor_parallel=1), V0)],
    ),
    "DistServe chatbot 66B (Llama-2-70B, ShareGPT)": dict(
        model="llama-2-70b",
        **SHAREGPT,
        ttft_s=0.4,
        tpot_s=0.1,
        start_rps=0.25,
        published="DistServe (prefill TP4 + decode TP2xPP2) 2.0x-4.6x vLLM TP4 per GPU",
        layouts=_colocated(1, 4)
        + [(_split(1, 1, 4), None), (_split(2, 1, 4), None)]
        + [(Layout("colocated", 0, replicas=n, tensor_parallel=4), V0) for n in (2, 3)],
    ),
    "DistServe chatbot 13B, each system's own steps (DistServe artifact)": dict(
        model="llama-2-13b",
        **(
            SHAREGPT
            # the artifact's KV pool for OPT-13B on one A100 (66,144 tokens), every instance (a
            # prefill instance holds only its step's prompts, far below it)
            | {"scheduler": SHAREGPT["scheduler"] | {"num_kv_blocks": ARTIFACT_KV_TOKENS // 16}}
        ),
        ttft_s=0.25,
        tpot_s=0.1,
        start_rps=0.5,
        published="DistServe (prefill TP2 + decode TP1) 2.0x-4.6x vLLM per GPU (13B/66B/175B)",
        # attainment at fixed rates too: the baseline's is capped near its short prompts' share
        curve_rates_per_gpu=(0.1, 0.25, 0.5, 0.75, 1.0, 1.5),
        layouts=[
            (Layout("colocated", 0, replicas=1, tensor_parallel=1), V0, "vllm"),
            (_split(1, 1, 2, 1), None, "distserve"),
            (Layout("colocated", 0, replicas=1, tensor_parallel=1), V0, "distserve"),
            (_split(1, 1, 2, 1), None, "vllm"),
            (Layout("colocated", 0, replicas=3, tensor_parallel=1), V0, "vllm"),
        ],
    ),
    "ours: long prompts, short answers (Llama-2-7B, Azure code)": dict(
        model="llama-2-7b",
        gpu="A100-80GB",
        prompt={"kind": "preset", "name": "azure-code-prompt"},
        output={"kind": "preset", "name": "azure-code-output"},
        ttft_s=1.0,
        tpot_s=0.04,
        link="nvlink-3",
        start_rps=1.0,
        published="none: not a paper's setting (where the prefill stall binds TPOT)",
        layouts=_colocated(1, 1) + [(_split(1, 1, 1), None), (_split(2, 1, 1), None)],
    ),
}
