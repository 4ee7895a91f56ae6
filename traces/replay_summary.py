"""What a replay measured, summarised like `vllm bench serve`, and saved per request as JSON or CSV."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from traces.replay import ReplayResult, RequestRecord

GOODPUT_METRICS = {"ttft": "ttft_s", "tpot": "tpot_s", "e2el": "e2e_s"}


class LatencyStats(BaseModel):
    """Seconds; None when no request had the value."""

    mean: float | None
    median: float | None
    p99: float | None

    @classmethod
    def of(cls, values: list[float]) -> LatencyStats:
        if not values:
            return cls(mean=None, median=None, p99=None)
        array = np.asarray(values, dtype=float)
        return cls(
            mean=float(array.mean()),
            median=float(np.median(array)),
            p99=float(np.percentile(array, 99)),
        )


class ReplaySummary(BaseModel):
    model: str
    completed: int
    failed: int
    rejected: int  # of the failed: refused with 503 (admission control)
    skipped: int
    duration_s: float
    total_input_tokens: int
    total_output_tokens: int
    request_throughput: float  # completed requests per second
    output_throughput: float  # tokens per second
    total_token_throughput: float
    goodput: float | None  # completed requests inside every SLO, per second
    goodput_slo_ms: dict[str, float]
    ttft: LatencyStats
    tpot: LatencyStats
    itl: LatencyStats
    e2e: LatencyStats


def parse_goodput(items: list[str]) -> dict[str, float]:
    """['ttft:500', 'tpot:50'] as {'ttft': 500.0, 'tpot': 50.0} (milliseconds)."""
    slos = {}
    for item in items:
        for part in item.split():
            name, _, value = part.partition(":")
            try:
                slos[name] = float(value)
            except ValueError:
                slos[name] = float("nan")
            if name not in GOODPUT_METRICS or not slos[name] > 0:
                raise ValueError(
                    f"goodput SLO {part!r}; expected NAME:MILLISECONDS with NAME one of "
                    f"{sorted(GOODPUT_METRICS)} and a positive number"
                )
    return slos


def _meets(record: RequestRecord, slos_ms: dict[str, float]) -> bool:
    for name, limit_ms in slos_ms.items():
        value = record.tpot_s if name == "tpot" else getattr(record, GOODPUT_METRICS[name])
        if value is not None and value * 1e3 > limit_ms:
            return False
    return True


def summarise(
    result: ReplayResult, goodput_slo_ms: dict[str, float] | None = None
) -> ReplaySummary:
    ok = [r for r in result.records if r.ok]
    failed = [r for r in result.records if not r.ok]
    duration = max(result.duration_s, 1e-9)
    input_tokens, output_tokens = sum(r.prompt_tokens for r in ok), sum(r.output_tokens for r in ok)
    slos = dict(goodput_slo_ms or {})
    good = sum(_meets(r, slos) for r in ok) if slos else None
    return ReplaySummary(
        model=result.model,
        completed=len(ok),
        failed=len(failed),
        rejected=sum(r.status == "rejected" for r in failed),
        skipped=result.skipped,
        duration_s=result.duration_s,
        total_input_tokens=input_tokens,
        total_output_tokens=output_tokens,
        request_throughput=len(ok) / duration,
        output_throughput=output_tokens / duration,
        total_token_throughput=(input_tokens + output_tokens) / duration,
        goodput=None if good is None else good / duration,
        goodput_slo_ms=slos,
        ttft=LatencyStats.of([r.ttft_s for r in ok if r.ttft_s is not None]),
        tpot=LatencyStats.of([r.tpot_s for r in ok if r.tpot_s is not None]),
        itl=LatencyStats.of([x for r in ok for x in r.itl_s]),
        e2e=LatencyStats.of([r.e2e_s for r in ok if r.e2e_s is not None]),
    )


def format_summary(summary: ReplaySummary, title: str = "Serving Benchmark Result") -> str:
    width = 50
    lines = [f" {title} ".center(width, "=")]

    def row(label: str, value) -> None:
        lines.append(f"{label:<40}{value:<10}")

    row("Successful requests:", summary.completed)
    row("Failed requests:", summary.failed)
    if summary.rejected:
        row("  of which rejected (503):", summary.rejected)
    if summary.skipped:
        row("Skipped (no output in trace):", summary.skipped)
    row("Benchmark duration (s):", f"{summary.duration_s:.2f}")
    row("Total input tokens:", summary.total_input_tokens)
    row("Total generated tokens:", summary.total_output_tokens)
    row("Request throughput (req/s):", f"{summary.request_throughput:.2f}")
    if summary.goodput is not None:
        row("Request goodput (req/s):", f"{summary.goodput:.2f}")
    row("Output token throughput (tok/s):", f"{summary.output_throughput:.2f}")
    row("Total Token throughput (tok/s):", f"{summary.total_token_throughput:.2f}")
    for key, heading, short in (
        ("ttft", "Time to First Token", "TTFT"),
        ("tpot", "Time per Output Token (excl. 1st token)", "TPOT"),
        ("itl", "Inter-token Latency", "ITL"),
        ("e2e", "End-to-end Latency", "E2EL"),
    ):
        lines.append(f"{heading}".center(width, "-"))
        stats: LatencyStats = getattr(summary, key)
        for name, value in (("Mean", stats.mean), ("Median", stats.median), ("P99", stats.p99)):
            row(f"{name} {short} (ms):", "n/a" if value is None else f"{value * 1e3:.2f}")
    lines.append("=" * width)
    return "\n".join(lines)


CSV_COLUMNS = (
    "index",
    "tenant",
    "arrival_s",
    "sent_s",
    "status",
    "http_status",
    "prompt_tokens",
    "expected_output_tokens",
    "output_tokens",
    "ttft_s",
    "tpot_s",
    "itl_mean_s",
    "itl_max_s",
    "e2e_s",
    "error",
)


def write_json(path: str | Path, summary: ReplaySummary, result: ReplayResult) -> Path:
    path = Path(path)
    path.write_text(
        json.dumps(
            {"summary": summary.model_dump(), "requests": [r.as_dict() for r in result.records]},
            indent=1,
        )
    )
    return path


def write_csv(path: str | Path, result: ReplayResult) -> Path:
    path = Path(path)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for record in result.records:
            row = {k: v for k, v in record.as_dict().items() if k in CSV_COLUMNS}
            row["itl_mean_s"] = float(np.mean(record.itl_s)) if record.itl_s else None
            row["itl_max_s"] = max(record.itl_s) if record.itl_s else None
            writer.writerow(row)
    return path


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _percentile(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def flat_summary(records: list[RequestRecord], duration_s: float) -> dict[str, float | int | None]:
    """The flat per-run metrics that live replays and simulations share (validation compares them key
    by key). TTFT: arrival to first token, queueing included; TPOT: (E2E − TTFT) / (output tokens − 1),
    the first token excluded; both as `vllm bench serve` defines them. Seconds; None when no request
    had the value."""
    ok = [r for r in records if r.ok]
    duration = max(duration_s, 1e-9)
    ttft = [r.ttft_s for r in ok if r.ttft_s is not None]
    tpot = [r.tpot_s for r in ok if r.tpot_s is not None]
    e2e = [r.e2e_s for r in ok if r.e2e_s is not None]
    queue = [r.queue_s for r in ok if r.queue_s is not None]
    output_tokens = sum(r.output_tokens for r in ok)
    return {
        "requests": len(records),
        "completed": len(ok),
        "timed_out": sum(r.status == "timeout" for r in records),
        "rejected": sum(r.status == "rejected" for r in records),
        "failed": sum(r.status in ("http_error", "error") for r in records),
        "in_flight": sum(r.status in ("pending", "in_flight") for r in records),
        "retries": sum(r.retries for r in records),
        "duration_s": duration_s,
        "throughput_rps": len(ok) / duration,
        "output_tokens_per_s": output_tokens / duration,
        "ttft_mean_s": _mean(ttft),
        "ttft_p50_s": _percentile(ttft, 50),
        "ttft_p99_s": _percentile(ttft, 99),
        "tpot_mean_s": _mean(tpot),
        "tpot_p50_s": _percentile(tpot, 50),
        "tpot_p99_s": _percentile(tpot, 99),
        "e2e_mean_s": _mean(e2e),
        "e2e_p50_s": _percentile(e2e, 50),
        "e2e_p99_s": _percentile(e2e, 99),
        "queue_mean_s": _mean(queue),
        "queue_p99_s": _percentile(queue, 99),
        "preemptions": sum(r.num_preemptions for r in records),
    }
