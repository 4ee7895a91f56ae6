"""The live engine's confirmation of chosen points of the claims report, with repeats.

The simulator carries the load sweeps; here the real engine (`cpu-small`, 56M parameters, dummy weights,
on this machine's CPU) runs continuous batching with paged KV against the static server that reserves
`max_model_len` per request, at the same settings as benchmarks/engine_cpu.py (KV pool 256 blocks x 16
tokens, max_num_seqs 32, max_model_len 512), on the same requests for both: Azure-conversation lengths
scaled to the small model (prompts 1/8, outputs 1/4). Each repeat draws its own requests and measures
(1) offline throughput, both policies, and (2) Poisson arrivals at each chosen load, a share of the
static server's offline request rate measured in that repeat: the mean latency of each. A ratio is the
mean over repeats with its 95% Student-t interval; one run backs no claim (this shared machine's runs
swing by tens of percent). The two policies alternate which goes first from repeat to repeat, so a
drift in the machine's speed does not favour one. Torch loads only when this runs.
"""

from __future__ import annotations

import numpy as np

from simulator.planner.claims_base import interval, reason, verdict
from traces.lengths import PresetLength

MODEL = "cpu-small"
ENGINE = dict(max_model_len=512, num_kv_blocks=256, block_size=16, max_num_seqs=32)
LABEL = "measured (cpu-small on this CPU)"


def _engines(seed: int) -> dict:
    from engine.llm import LLM  # torch loads here

    return {
        policy: LLM(
            model=MODEL,
            load_format="dummy",
            dtype="float32",
            device="cpu",
            seed=seed,
            policy=policy,
            **ENGINE,
        ).engine
        for policy in ("continuous", "static")
    }


def _requests(requests: int, seed: int, vocab_size: int):
    from engine.workload import requests_of, scale_lengths

    rng = np.random.default_rng(seed)
    prompt = PresetLength(name="azure-conv-prompt").sample(rng, requests)
    output = PresetLength(name="azure-conv-output").sample(rng, requests)
    prompts, outputs, _clipped = scale_lengths(
        prompt, output, 1 / 8, 1 / 4, ENGINE["max_model_len"]
    )
    return requests_of(prompts, outputs, vocab_size, seed)


def run_live(
    repeats: int = 3,
    requests: int = 48,
    loads: tuple[float, ...] = (0.9,),
    seed: int = 0,
    progress: bool = False,
) -> dict:
    """{"throughput": [continuous / static output tokens/s, per repeat], "latency": {load: [mean latency
    ratio per repeat]}, "runs": [every run's WorkloadResult as a dict]}."""
    from engine.workload import run_workload

    engines = _engines(seed)
    vocab_size = engines["continuous"].model_config.vocab_size
    warm_prompts, warm_params = _requests(4, seed, vocab_size)
    for policy, engine in engines.items():  # first-call overheads stay out of the measured runs
        run_workload(engine, warm_prompts, warm_params, f"warm-up {policy}")
    found = {
        "throughput": [],
        "latency": {load: [] for load in loads},
        "static_rps": [],
        "runs": [],
    }
    for repeat in range(repeats):
        prompts, params = _requests(requests, seed + 1 + repeat, vocab_size)
        order = ("continuous", "static") if repeat % 2 == 0 else ("static", "continuous")

        def pair(name: str, offsets=None) -> dict:
            results = {
                policy: run_workload(
                    engines[policy],
                    prompts,
                    params,
                    f"{name} {policy} r{repeat}",
                    arrival_offsets_s=offsets,
                    progress=progress,
                )
                for policy in order
            }
            found["runs"] += [result.as_dict() for result in results.values()]
            return results

        offline = pair("offline")
        found["throughput"].append(
            offline["continuous"].output_tokens_per_s / offline["static"].output_tokens_per_s
        )
        static_rps = offline["static"].requests_per_s
        found["static_rps"].append(static_rps)
        unit = np.cumsum(
            np.random.default_rng(seed + 1000 + repeat).exponential(1.0, requests)
        )  # 1 request/s
        for load in loads:
            online = pair(f"load {load:g}", unit / (load * static_rps))
            found["latency"][load].append(
                online["continuous"].mean_latency_s / online["static"].mean_latency_s
            )
    return found


def live_rows(found: dict, requests: int) -> list[dict]:
    """One row for throughput and one per load, labelled as measured on this CPU."""
    repeats = len(found["throughput"])
    setup = (
        f"{repeats} repeats of {requests} requests, continuous (paged) vs static (reserve max_model_len 512), "
        f"KV 256 x 16 tokens, max_num_seqs 32"
    )
    throughput = interval(found["throughput"])
    rows = [
        {
            "claim": "live engine: throughput, continuous / static (offline)",
            "article": "2-4x",
            "ours": f"{throughput[0]:.2f}x (95% CI {throughput[1]:.2f}-{throughput[2]:.2f}; {setup})",
            "verdict": verdict(throughput[1], throughput[2], (2.0, 4.0)),
            "reason": reason(throughput[1], throughput[2], (2.0, 4.0), True),
            "label": LABEL,
        }
    ]
    static_rps = float(np.mean(found["static_rps"]))
    for load, ratios in found["latency"].items():
        ratio = interval(ratios)
        rows.append(
            {
                "claim": f"live engine: mean latency, continuous / static at {load:.0%} of static's capacity "
                f"(about {load * static_rps:.2f} req/s, Poisson)",
                "article": "about -50% (0.5x)",
                "ours": f"{ratio[0]:.2f}x (95% CI {ratio[1]:.2f}-{ratio[2]:.2f}; {setup})",
                "verdict": verdict(ratio[1], ratio[2], (0.4, 0.6)),
                "reason": reason(ratio[1], ratio[2], (0.4, 0.6), False),
                "label": LABEL,
            }
        )
    return rows
