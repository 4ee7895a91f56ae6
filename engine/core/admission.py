"""Admission: which waiting requests the one scheduler starts this step, and how much KV each takes.

Pure Python; the scheduler's admission rules, kept here so `engine.core.scheduler` stays one screen of
policy (schedule the running, then admit). Continuous batching admits FCFS into the step's token budget
while blocks last (vLLM); on top of that, per `SchedulerConfig.admission`:

- `guaranteed_no_evict` (TensorRT-LLM's default capacity scheduler): a request starts only when it and
  every running request fit at full length (prompt + max_tokens, capped at max_model_len), so nothing
  is ever preempted;
- `new_token_ratio` (SGLang 0.4): room for the prompt and whole output beside a decaying share of the
  running requests' remaining output (`engine.core.new_token_ratio`);
- a tenant over its KV quota is passed over, so other tenants' requests behind it still start.

The `static` policy admits a batch together, each request reserving contiguous KV for its longest
possible sequence (`static_reserve`: the request's own or the model's), and nothing more until it drains.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.core import new_token_ratio
from engine.core.block_manager import blocks_for

if TYPE_CHECKING:
    from engine.core.config import SchedulerConfig
    from engine.core.request import Request
    from engine.core.scheduler import Scheduler
    from engine.core.scheduler_output import SchedulerOutput


def admit_waiting(
    scheduler: Scheduler, out: SchedulerOutput, budget: int, now: float, whole: bool = False
) -> None:
    """FCFS admission into `budget` tokens; `whole`: after the first, only prompts that fit whole
    (vLLM v0 took whole prompts; the first may still be cut to the budget, so none starves)."""
    bm, waiting, skipped = scheduler.block_manager, scheduler.waiting, []
    size, config = scheduler.block_size, scheduler.config
    guaranteed = config.admission == "guaranteed_no_evict"
    # GUARANTEED_NO_EVICT: the blocks the running requests still lack at full length, summed at the
    # pass's first candidate (O(running)) and kept current as requests start, not summed for each one
    lacking: int | None = None
    room = None if scheduler.new_token_ratio is None else new_token_ratio.room_tokens(scheduler)
    while waiting and budget > 0 and len(scheduler.running) < config.max_num_seqs:
        req = waiting[0]
        cached = bm.get_computed_blocks(req)
        num_cached = len(cached) * size
        num_new = min(req.num_tokens - num_cached, budget)
        if whole and out.num_admitted and num_new < req.num_tokens - num_cached:
            break
        if guaranteed:
            if lacking is None:
                lacking = running_lacking_blocks(scheduler)
            if full_length_blocks(scheduler, req) - len(cached) + lacking > bm.num_free_blocks:
                out.blocked = req
                break  # TensorRT-LLM's GUARANTEED_NO_EVICT: FCFS waits for room at full length
        if room is not None and new_token_ratio.request_tokens(req, num_cached) >= room:
            out.blocked = req
            break  # SGLang: FCFS waits for room beside the running requests' reserve
        if not bm.can_allocate(req, num_cached + num_new, cached):
            if over_tenant_quota(scheduler, req, num_cached + num_new):
                skipped.append(waiting.popleft())  # let other tenants pass
                continue
            out.blocked = req
            break  # the pool is full: FCFS waits
        waiting.popleft()
        if room is not None:
            room -= new_token_ratio.admitted_tokens(req, num_cached, num_new)
        bm.allocate(req, num_cached + num_new, cached)
        if lacking is not None:
            lacking += max(full_length_blocks(scheduler, req) - len(req.block_table), 0)
        req.num_computed_tokens = req.num_cached_tokens = num_cached
        scheduler._start_running(req, now)
        out.scheduled.append((req, num_new))
        if num_new == 1 and num_cached:
            out._decode.append(num_cached + 1)
        else:
            out._prefill.append((num_new, num_cached))
        out.num_admitted += 1
        budget -= num_new
    out.num_skipped = len(skipped)
    waiting.extendleft(reversed(skipped))


def full_length_blocks(scheduler: Scheduler, req: Request) -> int:
    """Blocks `req` holds at its full length: prompt + max_tokens, capped at max_model_len."""
    return blocks_for(min(req.max_num_tokens, scheduler.config.max_model_len), scheduler.block_size)


def running_lacking_blocks(scheduler: Scheduler) -> int:
    """The blocks the running requests still lack to reach their full lengths. A waiting request
    fits at full length (GUARANTEED_NO_EVICT) when its own blocks beyond its cached prefix plus
    these are free."""
    total = 0
    for running in scheduler.running:
        lacking = full_length_blocks(scheduler, running) - len(running.block_table)
        total += lacking if lacking > 0 else 0
    return total


def over_tenant_quota(scheduler: Scheduler, req: Request, num_tokens: int) -> bool:
    """Whether `num_tokens` of KV would take `req`'s tenant past its block quota (None: no quota)."""
    headroom = scheduler.block_manager.tenant_headroom(req.tenant)
    return headroom is not None and blocks_for(num_tokens, scheduler.block_size) > headroom


def static_reserve_len(config: SchedulerConfig, req: Request) -> int:
    """Tokens of KV a static batch reserves for `req`: its own longest sequence, or the model's."""
    if config.static_reserve == "request":
        return min(req.max_num_tokens, config.max_model_len)
    return config.max_model_len


def admit_static_batch(scheduler: Scheduler, out: SchedulerOutput, now: float) -> None:
    """The static policy: admit FCFS while each request's contiguous reservation fits."""
    bm, waiting, config = scheduler.block_manager, scheduler.waiting, scheduler.config
    while waiting and len(scheduler.running) < config.max_num_seqs:
        req = waiting[0]
        num_blocks = blocks_for(static_reserve_len(config, req), scheduler.block_size)
        if not bm.can_allocate_contiguous(req, num_blocks):
            break
        waiting.popleft()
        bm.allocate_contiguous(req, num_blocks)
        req.static_reserved_blocks = num_blocks
        scheduler._start_running(req, now)
        out.num_admitted += 1
