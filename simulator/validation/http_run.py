"""The live side of `surgeplan validate --via http`: `surgeplan serve` in a child process on a free
loopback port (`engine.openai.launcher.ServerProcess`, its log in a file), driven by the replay
client, so the HTTP path's own costs (request parsing, streaming, thread hand-offs between the
event loop and the engine) are in what is measured. Gives the same `LiveRun` as the in-process
engine; its step log comes from the server's `GET /debug/steps` (`--record-steps`), so the host's
speed and the engine thread's time between steps are measured on this path too (garbage
collection in the server is not)."""

from __future__ import annotations

import asyncio

import httpx
import numpy as np

from engine.openai.launcher import ServerProcess
from simulator.calibration.live_run import LiveRequests, LiveRun, StepLog
from simulator.calibration.schema import EngineSettings, ShapeRecord
from traces import Trace
from traces.replay import ReplayConfig, replay

RECORDED_STEPS = 100_000  # the server's step window: far more than one validation run takes


class HttpEngine:
    def __init__(
        self,
        model: str,
        settings: EngineSettings,
        num_kv_blocks: int,
        seed: int = 0,
        startup_timeout_s: float = 180.0,
    ):
        self.model, self.settings, self.num_kv_blocks = model, settings, num_kv_blocks
        options = [
            "--model",
            model,
            "--load-format",
            "dummy",
            "--seed",
            str(seed),
            "--block-size",
            str(settings.block_size),
            "--num-kv-blocks",
            str(num_kv_blocks),
            "--max-num-seqs",
            str(settings.max_num_seqs),
            "--max-num-batched-tokens",
            str(settings.max_num_batched_tokens),
            "--max-model-len",
            str(settings.max_model_len),
            "--no-enable-prefix-caching",
            "--record-steps",
            str(RECORDED_STEPS),
            "--uvicorn-log-level",
            "warning",
        ]
        self.server = ServerProcess(options)
        self.url = self.server.url
        try:
            self.server.wait_healthy(startup_timeout_s)
        except RuntimeError as error:
            raise ValueError(str(error)) from None

    device = "cpu (over HTTP)"

    def run(self, requests: LiveRequests, seed: int = 0, progress=None) -> LiveRun:
        trace = Trace(
            np.asarray(requests.arrival_s, dtype=float),
            np.asarray(requests.prompt_tokens),
            np.asarray(requests.output_tokens),
            name="validate",
        )
        before = self._steps(since=1 << 62)["total"]
        result = asyncio.run(replay(trace, ReplayConfig(url=self.url, seed=seed, min_token_id=3)))
        failed = [r for r in result.records if not r.ok]
        if failed:
            raise ValueError(
                f"{len(failed)} requests failed over HTTP (first: {failed[0].status} {failed[0].error}); "
                "expected every request served"
            )
        duration = max((r.arrival_s + r.e2e_s for r in result.records), default=0.0)
        return LiveRun(
            result.records,
            self._step_log(before),
            duration,
            None,
            sum(r.num_preemptions for r in result.records),
        )

    def _steps(self, since: int) -> dict:
        answer = httpx.get(f"{self.url}/debug/steps", params={"since": since}, timeout=30.0)
        answer.raise_for_status()
        return answer.json()

    def _step_log(self, since: int) -> StepLog:
        """The steps the server took for this run (those recorded since `since`), starts from the first."""
        data = self._steps(since)
        if data["total"] - since > len(data["steps"]):
            raise ValueError(
                f"the server kept {len(data['steps'])} of this run's {data['total'] - since} steps; "
                f"expected a run under {RECORDED_STEPS} steps"
            )
        steps = data["steps"]
        first = steps[0]["start_s"] if steps else 0.0
        return StepLog(
            shapes=[ShapeRecord.model_validate(step["shape"]) for step in steps],
            step_s=[step["step_s"] for step in steps],
            busy_s=[step["busy_s"] for step in steps],
            start_s=[step["start_s"] - first for step in steps],
        )

    def close(self) -> None:
        self.server.close()
