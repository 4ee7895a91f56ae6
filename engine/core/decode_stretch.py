"""Decode-only stretches: many steps of the same running requests advanced at once, exactly.

Pure Python; the bodies of `Scheduler.decode_stretch` and `Scheduler.advance_decodes`, for the
simulator, whose replicas would otherwise pay a Python loop over every running request at every step.
Between two events that change the batch (an admission, a preemption, a finish, an arrival) the
scheduler's steps are 1-token decodes of the same requests, so `stretch_length` proves how many such
steps come next and `advance` applies them in O(running + block crossings), not O(running × steps):
tokens are appended in bulk, and only the steps where a request crosses a block boundary (a fresh
block at `schedule()`, a prefix-cache registration at `update()`) are replayed, in the step-by-step
order (step, then `schedule` before `update`, then position in `running`), so block ids, LRU evictions
and cache registrations come out identical. Which requests stop at the last step is decided by the
scheduler's own stop test (`Scheduler.finish_stopped`).

What could make an intermediate `schedule()` do something else, and how it is ruled out:
- a finish: a request's length limit, or (only if it can stop on a token, which is unknown here) the
  first step where a stop token would count, ends the stretch at that step;
- a preemption: the n-th crossing in the stretch needs n free blocks, and its tenant's quota room;
- an admission (continuous policy): the waiting requests `schedule()` examined and refused stay refused
  while free blocks and tenant room only shrink and their prefix-cache hits stay. Each crossing that
  evicts one of their hits, or takes room from the blocked request's tenant, is followed by the same
  admission test on the new figures; the stretch ends before the first step that would pass it or pass
  over the blocked request (the next one would then be examined). A hit is gained only when a running
  request registers a block whose tokens continue a refused request's prompt: the stretch ends after
  the first registration of a running request whose tokens so far are such a prefix (told apart by
  their chained hashes: exact up to collisions of the 64-bit hash, which the prefix cache itself
  already assumes away).
The static policy admits nothing while a batch runs and reserves every block up front, so its
decode steps are stretches up to the first finish. A step with a prefill (even of a 1-token prompt,
which looks like a decode but computes from nothing) starts no stretch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from engine.core import stretch_limits

if TYPE_CHECKING:
    from engine.core.request import Request
    from engine.core.scheduler import Scheduler
    from engine.core.scheduler_output import SchedulerOutput


def stretch_length(scheduler: Scheduler, out: SchedulerOutput, max_steps: int) -> int:
    if not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"max_steps is {max_steps!r}; expected an integer ≥ 1")
    out.max_decode_steps = 1
    scheduled = out.scheduled
    # a waiting request ends the stretch where it could change what a step does: without mixed steps
    # a prompt that fits runs a prefill step; an eviction could turn a refused request's GPU hit into
    # a host hit; a decaying reserve ratio may let it in at any step; a batch wait counts each step
    # that holds it back
    if scheduler.waiting and (
        scheduler.block_manager.host_tier is not None
        or not scheduler.config.mixed_steps
        or scheduler.new_token_ratio is not None
        or scheduler.batch_wait is not None
    ):
        return 1
    if scheduler.hands_over and any(
        req.num_tokens == req.num_prompt_tokens for req, _ in scheduled
    ):
        return 1  # prefill role: a first token in the stretch would be handed over (`update`)
    if (
        max_steps == 1
        or out.preempted
        or out.num_admitted
        or not scheduled
        or len(scheduled) != len(scheduler.running)
    ):
        return 1
    refused = stretch_limits.refused_requests(scheduler, out)
    if refused is None:
        return 1
    limit, firsts = _scan(scheduler, scheduled, max_steps)
    if limit == 1:
        return 1
    bm = scheduler.block_manager
    refusals = []
    if refused and (bm.enable_prefix_caching or bm.tenant_block_quota):  # else they cannot change
        refusals = [stretch_limits.Refusal(scheduler, req, req is out.blocked) for req in refused]
        if bm.enable_prefix_caching:
            limit = stretch_limits.registration_limit(scheduler, refusals, limit)
            if limit == 1:
                return 1
    counts = _crossing_counts(firsts, scheduler.block_size, limit)
    if counts[limit]:
        limit = stretch_limits.crossing_limit(scheduler, refusals, firsts, counts, limit)
    out.max_decode_steps = limit
    out._crossings, out._kv_start = counts, None
    return limit


def ignores_arrivals(scheduler: Scheduler, out: SchedulerOutput) -> bool:
    """Whether requests appended to the waiting queue during `out`'s stretch would go unexamined by
    every `schedule()` in it: they queue behind `out.blocked` (refused throughout the stretch), or no
    request may be admitted (the batch at `max_num_seqs` or its token budget; a static batch admits
    nothing while it runs). Not with an SLO batch controller (it reads the queue), a host KV tier or
    without mixed steps (a waiting request ends their stretches), nor in a disaggregated role."""
    config = scheduler.config
    if (
        scheduler.controller is not None
        or scheduler.hands_over
        or scheduler.num_handoffs
        or scheduler.block_manager.host_tier is not None
        or not config.mixed_steps
    ):
        return False
    if config.policy != "continuous":
        return True
    num_running = len(scheduler.running)
    return (
        out.blocked is not None
        or num_running >= config.max_num_seqs
        or config.max_num_batched_tokens - num_running <= 0
    )


def kv_after(
    scheduler: Scheduler, out: SchedulerOutput, num_steps: int
) -> tuple[float, int, float]:
    """From the state at the stretch's start (nothing changes before `advance`): the KV utilisation
    and used blocks after `num_steps` of its steps, and the utilisation after the next `schedule()`.
    Each step adds one stored token per request; each block crossing one used block, held by one
    request (so the count of shared blocks stays); `out._crossings[k]` counts those at schedule(0..k-1)
    (`_crossing_counts`)."""
    if out._kv_start is None:
        stored, _ = scheduler._stored_and_reserved_slots()
        out._kv_start = (stored, scheduler.block_manager.num_used_blocks)
    stored, used = out._kv_start
    size, counts = scheduler.block_size, out._crossings
    stored += num_steps * len(out.scheduled)
    used_end = used + counts[num_steps]
    used_next = used + counts[num_steps + 1]
    return (
        stored / (used_end * size) if used_end else 1.0,
        used_end,
        stored / (used_next * size) if used_next else 1.0,
    )


def _scan(
    scheduler: Scheduler, scheduled: list[tuple[Request, int]], limit: int
) -> tuple[int, list[int]]:
    """(1 + the first step at which a request could finish, its token being the stretch's last; each
    request's first block crossing, the step whose schedule() gives it a fresh block, by position in
    `running`: it crosses again every `block_size` steps), in one pass; (1, []) when `scheduled` is not
    a pure decode of `running` in order."""
    running, size = scheduler.running, scheduler.block_size
    firsts: list[int] = []
    for i, (req, num_new) in enumerate(scheduled):
        tokens = req.num_tokens
        computed = tokens - 1  # a decode: one token to compute, after others
        if (
            num_new != 1
            or req.num_computed_tokens != computed
            or not computed
            or req is not running[i]
        ):
            return 1, []
        last = req.stop_len - tokens - 1  # the step whose token reaches its length
        if req.stops_on_token:  # any token might stop it once min_tokens are out
            stop = req.params.min_tokens - (tokens - req.num_prompt_tokens) - 1
            last = stop if stop < last else last
        if last + 1 < limit:
            if last <= 0:
                return 1, []
            limit = last + 1
        firsts.append(len(req.block_table) * size - computed)
    return limit, firsts


def _crossing_counts(firsts: list[int], size: int, limit: int) -> list[int]:
    """counts[k]: the block crossings at the schedule() of steps 0 .. k - 1, for k = 0 .. limit + 1, the
    request at position i crossing at steps firsts[i], firsts[i] + size, ...: O(requests + limit),
    without listing the crossings (a stretch is often cut after a step or two)."""
    # requests whose first crossing is within a block: they cross at the steps ≡ it (mod size)
    by_residue = [0] * size
    later = [0] * (limit + 1)  # the crossings of the others, step by step
    for first in firsts:
        if first < size:
            by_residue[first] += 1
        else:
            for step in range(first, limit + 1, size):
                later[step] += 1
    counts = [0] * (limit + 2)
    total = 0
    for step in range(limit + 1):
        total += by_residue[step % size] + later[step]
        counts[step + 1] = total
    return counts


def advance(
    scheduler: Scheduler,
    out: SchedulerOutput,
    num_steps: int,
    step_end_times: Sequence[float],
    token_id: int,
) -> list[Request]:
    if not isinstance(num_steps, int) or not 1 <= num_steps <= out.max_decode_steps:
        raise ValueError(
            f"num_steps is {num_steps!r}; expected 1 ≤ num_steps ≤ {out.max_decode_steps}, what "
            "decode_stretch(out, ...) returned for this output"
        )
    if len(step_end_times) < num_steps:
        raise ValueError(
            f"step_end_times has {len(step_end_times)} entries; expected one per step ({num_steps})"
        )
    out.max_decode_steps = 1
    scheduled = out.scheduled
    if num_steps == 1:
        return scheduler.update(out, [token_id] * len(scheduled), step_end_times[0])
    bm, size, num_running = scheduler.block_manager, scheduler.block_size, len(scheduled)
    caching, first_end, tokens = bm.enable_prefix_caching, step_end_times[0], [token_id] * num_steps
    # The block crossings, replayed in the step-by-step order: step by step, a fresh block at
    # schedule(step) before a block registered at update(step), each by position in `running`. A
    # request crosses every `size` steps, so positions are kept by the residue (mod `num_buckets`) of
    # the steps they cross at, with the first such step for fresh blocks (a registration's first step
    # is below `size`: it is its residue).
    num_buckets = size if size < num_steps else num_steps
    takes: list[list[int]] = [[] for _ in range(num_buckets)]
    registers: list[list[int]] = [[] for _ in range(num_buckets)] if caching else []
    first_take: list[int] = []
    may_stop: list[tuple[Request, int]] = []
    news: list[Request] = []  # (`Scheduler.news`)
    for i, (req, _) in enumerate(scheduled):
        computed = req.num_computed_tokens
        first = len(req.block_table) * size - computed
        first_take.append(first)
        if first < num_steps:
            takes[first % num_buckets].append(i)
        if caching:
            first = -(computed + 1) % size
            if first < num_steps:
                registers[first].append(i)
        if req.uniform_output_token is None:  # (else counted in num_tokens, not stored)
            req._output_token_ids.extend(tokens)  # `append_decoded_tokens`, inlined: the hot loop
        req.num_tokens += num_steps
        req.num_computed_tokens = computed + num_steps
        first_token = req.first_token_time is None
        if first_token:
            req.first_token_time = first_end
        if req.num_tokens >= req.stop_len or req.stops_on_token:
            may_stop.append((req, token_id))
            news.append(req)
        elif first_token:
            news.append(req)
    scheduler.news = news
    scheduler._running_computed += num_steps * num_running  # (`scheduled` is all of `running`)
    takers: list[Request] = []  # without caching, fresh blocks only: handed out in one loop
    for step in range(num_steps):
        bucket = step % num_buckets
        for i in takes[bucket]:
            if first_take[i] <= step:
                req = scheduled[i][0]
                if caching:
                    bm.take_fresh_blocks(req)
                    scheduler._running_blocks += 1
                else:
                    takers.append(req)
        if caching:
            for i in registers[bucket]:  # update(step) filled a block: register it
                req = scheduled[i][0]
                bm.cache_full_blocks(req, (req.num_computed_tokens - num_steps + step + 1) // size)
    if takers:
        bm.take_fresh_block_each(takers)
        scheduler._running_blocks += len(takers)
    if may_stop:  # the last update's finishes
        scheduler.finish_stopped(may_stop, step_end_times[num_steps - 1])
    return [req for req, _ in scheduled]
