"""The claims report's answer to "does FP8 KV help?": the spike claim's replica (Llama-2-7B on one
A100,
a 10x spike, 10-second clients) simulated with the KV cache in auto (float16), fp8 and int8, each
dtype's
P99 TTFT and TPOT, abandoned share, preemptions and $/request beside its measured quality cost (KL
divergence, top-1 agreement, perplexity from benchmarks/kv_cache_quality.py). What FP8 buys is
simulated
(KV blocks from the one memory formula; decode attention from the KV bytes read, labelled derived);
what
it costs is measured on a small locally trained model, not on Llama-2-7B."""

from __future__ import annotations

from simulator.kv_quality import measured_quality
from simulator.planner.claims_base import all_at_once, job
from simulator.planner.outcome import Outcome
from simulator.scenario import Scenario

KV_CACHE_DTYPES = ("auto", "fp8", "int8")


def kv_cache_search(spike: Scenario):
    """(search for `search.drive`, the dtypes in order): the spike scenario once per KV cache
    dtype."""
    scenarios = [
        spike.model_copy(
            update={
                "name": f"{spike.name}-kv-{kv}",
                "scheduler": spike.scheduler.model_copy(update={"kv_cache_dtype": kv}),
            }
        )
        for kv in KV_CACHE_DTYPES
    ]
    return all_at_once(
        [job(scenario, {"phase": "claims: kv cache dtype"}) for scenario in scenarios]
    ), KV_CACHE_DTYPES


def kv_cache_row(outcomes: list[Outcome], label: str) -> tuple[dict, list[dict]]:
    """The row, and per dtype its figures, from the spike's outcomes in KV_CACHE_DTYPES order."""
    figures = []
    for kv, outcome in zip(KV_CACHE_DTYPES, outcomes):
        summary = outcome.summary
        figures.append(
            {
                "kv_cache_dtype": kv,
                "kv_blocks_per_replica": outcome.facts["kv_blocks_per_replica"],
                "ttft_p99_s": summary.ttft_p99_s,
                "tpot_p99_s": summary.tpot_p99_s,
                "abandon_rate": summary.abandon_rate,
                "preemptions": summary.preemptions,
                "cost_per_request_usd": summary.cost_per_request_usd,
                "quality": measured_quality(kv),
            }
        )
    auto, fp8 = figures[0], figures[1]
    parts = []
    for figure in figures:
        quality = figure["quality"]
        cost = (
            "quality not measured"
            if quality is None
            else f"KL {quality['kl_divergence']:.1e}, top-1 {quality['top1_agreement']:.1%}, ppl "
            f"{quality['perplexity']:.3f}"
        )
        parts.append(
            f"{figure['kv_cache_dtype']}: {figure['kv_blocks_per_replica']:,} blocks, P99 TTFT "
            f"{figure['ttft_p99_s'] or 0:.2f} s, P99 TPOT {(figure['tpot_p99_s'] or 0) * 1e3:.0f} ms, "
            f"abandoned {figure['abandon_rate']:.1%}, {figure['preemptions']} preemptions, "
            f"${figure['cost_per_request_usd'] or 0:.6f}/request ({cost})"
        )
    helps = (fp8["abandon_rate"], fp8["ttft_p99_s"] or 0) < (
        auto["abandon_rate"],
        auto["ttft_p99_s"] or 0,
    )
    row = {
        "claim": "does FP8 KV help? the 10x spike on one replica with the KV cache in auto / fp8 / int8",
        "article": "(readers' question) INT8/FP8 double the KV held and halve the KV read, at a quality cost",
        "ours": "; ".join(parts),
        "verdict": "helps" if helps else "no gain",
        "label": label
        + "; decode attention with fp8/int8 derived from KV bytes; quality measured on a "
        "small model trained locally (benchmarks/kv_cache_quality.py)",
    }
    return row, figures
