"""Run the live engine on a list of requests in real time and record what happened: one
`RequestRecord` per request (the replay client's record type, so live and simulated runs share one
summary) and every step's shape and time (for fitting the cost model on a real workload).

With the profiler, the one place in the simulator that runs the live engine; torch loads lazily.
Requests enter at their arrival offsets from the start; a step's `busy_s` is the wall time from its
start to the next step's start while the engine stays busy, so the engine loop's own overhead between
steps is in it (it is what the simulator's step must cost for its clock to keep the engine's pace).
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simulator.calibration.schema import EngineSettings, ShapeRecord
from traces.replay import RequestRecord


@dataclass(frozen=True)
class LiveRequests:
    """What to send: arrival offsets (s), prompt and output lengths."""

    arrival_s: Sequence[float]
    prompt_tokens: Sequence[int]
    output_tokens: Sequence[int]

    def __post_init__(self) -> None:
        if not len(self.arrival_s) == len(self.prompt_tokens) == len(self.output_tokens):
            raise ValueError(
                f"LiveRequests: {len(self.arrival_s)} arrivals, {len(self.prompt_tokens)} prompts, "
                f"{len(self.output_tokens)} outputs; expected equal counts"
            )


@dataclass
class StepLog:
    """Every step of a live run: its shape, the engine's own `step()` time and the busy time."""

    shapes: list[ShapeRecord] = field(default_factory=list)
    step_s: list[float] = field(default_factory=list)
    busy_s: list[float | None] = field(default_factory=list)
    start_s: list[float] = field(default_factory=list)  # when each step began, from the run's start
    kv_weighted: float = 0.0  # Σ KV utilisation × step time, for the time-weighted mean
    kv_time: float = 0.0

    @classmethod
    def joined(cls, logs: Sequence[StepLog]) -> StepLog:
        """The steps of several runs in one log (each run's last step ended in idleness)."""
        joined = cls()
        for log in logs:
            joined.shapes += log.shapes
            joined.step_s += log.step_s
            joined.busy_s += log.busy_s
            joined.start_s += log.start_s
            joined.kv_weighted += log.kv_weighted
            joined.kv_time += log.kv_time
        return joined

    def save(
        self,
        path: str | Path,
        model: str,
        settings: EngineSettings,
        num_kv_blocks: int,
        device: str,
    ) -> Path:
        path = Path(path)
        path.write_text(
            json.dumps(
                {
                    "model": model,
                    "engine": settings.model_dump(),
                    "num_kv_blocks": num_kv_blocks,
                    "device": device,
                    "steps": [
                        {"shape": shape.model_dump(), "step_s": step, "busy_s": busy}
                        for shape, step, busy in zip(self.shapes, self.step_s, self.busy_s)
                    ],
                }
            )
        )
        return path


@dataclass
class LiveRun:
    records: list[RequestRecord]
    steps: StepLog
    duration_s: float
    kv_utilization: float | None
    num_preemptions: int
    gc_s: float = 0.0  # wall time in Python's garbage collector during the run (engine path only)


class LiveEngine:
    """One engine (cpu-small by default, dummy weights), reused across runs."""

    def __init__(
        self,
        model: str,
        settings: EngineSettings,
        num_kv_blocks: int,
        seed: int = 0,
        load_format: str = "dummy",
    ):
        from engine.llm import LLM  # torch loads here

        self.model, self.settings, self.num_kv_blocks = model, settings, num_kv_blocks
        self.llm = LLM(
            model=model,
            load_format=load_format,
            seed=seed,
            num_kv_blocks=num_kv_blocks,
            **settings.model_dump(exclude={"load_format"}),
        )
        self.engine = self.llm.engine
        self.vocab_size = self.engine.model_config.vocab_size
        self._runs = 0

    @property
    def device(self) -> str:
        return str(self.engine.device)

    def run(self, requests: LiveRequests, seed: int = 0, progress=None) -> LiveRun:
        engine = self.engine
        self._runs += 1
        rng = np.random.default_rng(seed)
        n = len(requests.arrival_s)
        prompts = [
            rng.integers(3, self.vocab_size, int(p)).tolist() for p in requests.prompt_tokens
        ]
        offsets = np.asarray(requests.arrival_s, dtype=float)
        records = [
            RequestRecord(
                index=i,
                tenant="default",
                arrival_s=float(offsets[i]),
                sent_s=float(offsets[i]),
                prompt_tokens=int(requests.prompt_tokens[i]),
                expected_output_tokens=int(requests.output_tokens[i]),
            )
            for i in range(n)
        ]
        log = StepLog()
        preempted_before = engine.scheduler.num_preemptions
        gc_timer = _GcTimer()
        gc.callbacks.append(gc_timer)
        start = time.perf_counter()
        try:
            self._loop(requests, prompts, offsets, records, log, start, progress)
        finally:
            gc.callbacks.remove(gc_timer)
        duration = max((r.arrival_s + r.e2e_s for r in records), default=0.0)
        return LiveRun(
            records,
            log,
            duration,
            log.kv_weighted / log.kv_time if log.kv_time else 1.0,
            engine.scheduler.num_preemptions - preempted_before,
            gc_timer.total_s,
        )

    def _loop(
        self,
        requests: LiveRequests,
        prompts: list,
        offsets: np.ndarray,
        records: list,
        log: StepLog,
        start: float,
        progress,
    ) -> None:
        from engine.core.sampling_params import SamplingParams

        engine, n = self.engine, len(offsets)
        done, next_index, last_start = 0, 0, None
        while done < n:
            now = time.perf_counter()
            while next_index < n and start + offsets[next_index] <= now:
                engine.add_request(
                    f"live{self._runs}-{next_index}",
                    prompts[next_index],
                    SamplingParams(
                        temperature=0,
                        max_tokens=int(requests.output_tokens[next_index]),
                        ignore_eos=True,
                    ),
                    arrival_time=start + offsets[next_index],
                )
                next_index += 1
            if not engine.has_unfinished_requests():
                last_start = None
                time.sleep(max(0.0, start + offsets[next_index] - time.perf_counter()))
                continue
            step_start = time.perf_counter()
            if last_start is not None:
                log.busy_s[-1] = step_start - last_start
            last_start = step_start
            outputs = engine.step()
            stats = engine.last_step
            log.shapes.append(ShapeRecord.of(stats.shape))
            log.step_s.append(stats.total_s)
            log.busy_s.append(None)
            log.start_s.append(step_start - start)
            kv = engine.kv_stats()
            log.kv_weighted += kv.utilization * stats.total_s
            log.kv_time += stats.total_s
            for output in outputs:
                if output.finished:
                    done += 1
                    self._record(records[int(output.request_id.rsplit("-", 1)[1])], output, start)
                    if progress is not None:
                        progress(done / n)

    @staticmethod
    def _record(record: RequestRecord, output, start: float) -> None:
        metrics = output.metrics
        record.status = "ok"
        record.output_tokens = len(output.output_token_ids)
        record.ttft_s = metrics.ttft
        record.e2e_s = metrics.e2e_latency
        record.queue_s = metrics.queue_time
        record.num_preemptions = output.num_preemptions


class _GcTimer:
    """A `gc.callbacks` hook that adds up the collector's wall time (a named source of live-run noise)."""

    def __init__(self) -> None:
        self.total_s, self._started = 0.0, None

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            self.total_s += time.perf_counter() - self._started
            self._started = None
