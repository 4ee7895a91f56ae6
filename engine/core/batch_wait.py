"""TensorRT-LLM's batch waiting: new prompts held back a few steps, so that more of them share one prefill.

Pure Python; the scheduler's `batch_wait_steps` rule, kept here so `engine.core.scheduler` stays one
concept. TensorRT-LLM's PyTorch executor (`PyExecutor._schedule` and `_waiting_requests` in
`tensorrt_llm/_torch/pyexecutor/py_executor.py`, options `batch_wait_timeout_iters` and
`batch_wait_max_tokens_ratio`; read 2026-12-06 in NVIDIA/TensorRT-LLM's 1.1-era copies in the code
index): once a step has scheduled both context (prompt) and generation requests, it drops the context
requests from that step unless it has already held them `batch_wait_timeout_iters` times in a row, or
the step's tokens (the context requests' prompts plus one a generation request) reach
`batch_wait_max_tokens_ratio` x `max_num_tokens`. Each hold counts one; a release resets the count. A
step with no generation request, or no context request it could schedule, neither holds nor counts
(no dead wait on an idle server). InferenceMAX runs Llama-3.1-70B on TensorRT-LLM with 20 steps and 0.9
for 1k / 1k prompts below TP8 (`benchmarks/70b_fp8_*_trt_*.sh`), which is why those runs' first tokens
take 20 decode steps longer than the other runs'.

Here, the step's tokens are those `schedule()` has already given the running requests plus the prompts
FCFS admission would take next by the token budget and `max_num_seqs` (a prompt past the budget
counted at its chunk, as admission would cut it); the KV pool's room is not asked, so a step whose
admission the pool would refuse counts as a hold where TensorRT-LLM (whose capacity scheduler runs
first) would not count it. Only new admissions wait: a running request's next prefill chunk goes on
(TensorRT-LLM holds those too, but its InferenceMAX runs have no chunked prefill).
"""

from __future__ import annotations

from itertools import islice
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.core.scheduler import Scheduler
    from engine.core.scheduler_output import SchedulerOutput


class BatchWait:
    """The count of steps in a row that held new prompts back (TensorRT-LLM's batch_wait_iters_count)."""

    __slots__ = ("steps", "max_tokens_ratio", "held")

    def __init__(self, steps: int, max_tokens_ratio: float) -> None:
        self.steps = steps
        self.max_tokens_ratio = max_tokens_ratio
        self.held = 0

    def holds(self, scheduler: Scheduler, out: SchedulerOutput, budget: int) -> bool:
        """Whether this step holds the waiting prompts back (counting the hold); called by `schedule()`
        after the running requests are scheduled, with the budget they left, before admission."""
        room = scheduler.config.max_num_seqs - len(scheduler.running)
        if not out._decode or not scheduler.waiting or budget <= 0 or room <= 0:
            return False  # no generation request, or no prompt it could take: no wait
        if self.held >= self.steps:
            self.held = 0
            return False
        # the token budget as this step's limits set it (an SLO batch controller moves it)
        max_tokens = scheduler.config.max_num_batched_tokens
        tokens = max_tokens - budget  # the running requests' tokens
        threshold = self.max_tokens_ratio * max_tokens
        for req in islice(scheduler.waiting, room):  # (stops once the count is decided)
            take = min(req.num_tokens, budget)
            tokens += take
            budget -= take
            if budget <= 0 or tokens >= threshold:
                break
        if tokens >= threshold:
            self.held = 0
            return False
        self.held += 1
        return True
