"""Run a batch of requests through an `LLMEngine`, offline or at given arrival times (real time),
and measure throughput, latency percentiles and KV utilisation. Shared by `surgeplan demo` and the
engine benchmarks."""

import time
from dataclasses import asdict, dataclass

import numpy as np

from engine.core.outputs import RequestOutput
from engine.core.sampling_params import SamplingParams
from engine.llm_engine import LLMEngine


@dataclass(frozen=True)
class WorkloadResult:
    label: str
    num_requests: int
    duration_s: float
    output_tokens: int
    output_tokens_per_s: float
    requests_per_s: float
    mean_latency_s: float
    p99_latency_s: float
    mean_ttft_s: float
    p99_ttft_s: float
    mean_queue_s: float
    kv_utilization: float  # time-weighted tokens stored / slots reserved
    kv_usage: float  # time-weighted used blocks / all blocks
    mean_running: float  # time-weighted requests in the batch
    num_preemptions: int

    def as_dict(self) -> dict:
        return asdict(self)


def requests_of(prompt_lengths, output_lengths, vocab_size: int, seed: int = 0):
    """Random token prompts of the given lengths, each with `ignore_eos` so it generates exactly its output length."""
    rng = np.random.default_rng(seed)
    prompts = [rng.integers(3, vocab_size, int(n)).tolist() for n in prompt_lengths]
    params = [
        SamplingParams(temperature=0, max_tokens=int(n), ignore_eos=True) for n in output_lengths
    ]
    return prompts, params


def run_workload(
    engine: LLMEngine,
    prompts: list[list[int]],
    params: list[SamplingParams],
    label: str,
    arrival_offsets_s=None,
    progress: bool = False,
) -> WorkloadResult:
    """Offline when `arrival_offsets_s` is None (everything arrives at once), else each request joins
    at its offset from the start, and its latency counts from that moment."""
    from tqdm import tqdm

    offsets = (
        np.zeros(len(prompts))
        if arrival_offsets_s is None
        else np.asarray(arrival_offsets_s, dtype=float)
    )
    order = np.argsort(offsets, kind="stable")
    preemptions_before = engine.scheduler.num_preemptions
    start = time.perf_counter()
    outputs: list[RequestOutput] = []
    weights = {"time": 0.0, "util": 0.0, "usage": 0.0, "running": 0.0}
    next_index = 0
    bar = tqdm(total=len(prompts), desc=label, disable=not progress, leave=False)
    while len(outputs) < len(prompts):
        now = time.perf_counter()
        while next_index < len(order) and start + offsets[order[next_index]] <= now:
            i = order[next_index]
            engine.add_request(
                f"{label}-{i}", prompts[i], params[i], arrival_time=start + offsets[i]
            )
            next_index += 1
        if not engine.has_unfinished_requests():
            time.sleep(max(0.0, start + offsets[order[next_index]] - time.perf_counter()))
            continue
        finished = [o for o in engine.step() if o.finished]
        outputs += finished
        bar.update(len(finished))
        _accumulate(weights, engine)
    bar.close()
    return _summarise(
        label,
        outputs,
        time.perf_counter() - start,
        weights,
        engine.scheduler.num_preemptions - preemptions_before,
    )


def _accumulate(weights: dict, engine: LLMEngine) -> None:
    step_s = engine.last_step.total_s
    stats = engine.kv_stats()
    weights["time"] += step_s
    weights["util"] += step_s * stats.utilization
    weights["usage"] += step_s * stats.usage
    weights["running"] += step_s * engine.last_step.shape.num_seqs


def _summarise(
    label: str, outputs: list[RequestOutput], duration_s: float, weights: dict, num_preemptions: int
) -> WorkloadResult:
    latency = np.array([o.metrics.e2e_latency for o in outputs])
    ttft = np.array([o.metrics.ttft for o in outputs])
    queue = np.array([o.metrics.queue_time for o in outputs])
    tokens = sum(len(o.output_token_ids) for o in outputs)
    busy = weights["time"] or 1.0
    return WorkloadResult(
        label=label,
        num_requests=len(outputs),
        duration_s=duration_s,
        output_tokens=tokens,
        output_tokens_per_s=tokens / duration_s,
        requests_per_s=len(outputs) / duration_s,
        mean_latency_s=float(latency.mean()),
        p99_latency_s=float(np.percentile(latency, 99)),
        mean_ttft_s=float(ttft.mean()),
        p99_ttft_s=float(np.percentile(ttft, 99)),
        mean_queue_s=float(queue.mean()),
        kv_utilization=weights["util"] / busy,
        kv_usage=weights["usage"] / busy,
        mean_running=weights["running"] / busy,
        num_preemptions=num_preemptions,
    )


def format_table(results: list[WorkloadResult]) -> str:
    header = (
        f"{'run':<28} {'reqs':>5} {'time s':>7} {'out tok/s':>10} {'req/s':>6} {'mean lat s':>10} "
        f"{'p99 lat s':>9} {'mean TTFT':>9} {'p99 TTFT':>8} {'KV util':>7} {'KV used':>7} {'batch':>6} {'preempt':>7}"
    )
    rows = [header, "-" * len(header)]
    for r in results:
        rows.append(
            f"{r.label:<28} {r.num_requests:>5} {r.duration_s:>7.1f} {r.output_tokens_per_s:>10.1f} "
            f"{r.requests_per_s:>6.2f} {r.mean_latency_s:>10.2f} {r.p99_latency_s:>9.2f} {r.mean_ttft_s:>9.2f} "
            f"{r.p99_ttft_s:>8.2f} {r.kv_utilization:>7.1%} {r.kv_usage:>7.1%} {r.mean_running:>6.1f} {r.num_preemptions:>7}"
        )
    return "\n".join(rows)


def scale_lengths(
    prompt_lengths, output_lengths, prompt_scale: float, output_scale: float, max_model_len: int
):
    """Shrink real lengths for a small model: scale each, keep ≥ 1, and clip the prompt so
    prompt + output fits max_model_len. Returns (prompts, outputs, number of prompts clipped)."""
    prompts = np.maximum(1, np.rint(np.asarray(prompt_lengths) * prompt_scale)).astype(int)
    outputs = np.maximum(1, np.rint(np.asarray(output_lengths) * output_scale)).astype(int)
    outputs = np.minimum(outputs, max_model_len // 2)
    room = max_model_len - outputs
    clipped = int((prompts > room).sum())
    return np.minimum(prompts, room), outputs, clipped
