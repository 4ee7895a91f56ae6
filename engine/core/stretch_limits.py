"""How far a decode stretch may go: the step before a block crossing would preempt, or before a
waiting request the stretch's first `schedule()` refused would be admitted at some later one.

Pure Python; the proofs behind `engine.core.decode_stretch.stretch_length` (that module's docstring
lists what could end a stretch and how each is ruled out). A refused request stays refused while free
blocks and its tenant's room only shrink and its prefix-cache hits stay: `crossing_limit` walks the
stretch's block crossings in step-by-step order and re-tests a refusal (`Refusal.still_refused`, the
test of `engine.core.admission.admit_waiting`) whenever a crossing evicts one of its hits or takes its
tenant's room; `registration_limit` cuts the stretch after the first registration that could give a
refused request a new hit.
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import islice
from typing import TYPE_CHECKING

from engine.core.block_manager import blocks_for

if TYPE_CHECKING:
    from engine.core.request import Request
    from engine.core.scheduler import Scheduler
    from engine.core.scheduler_output import SchedulerOutput


def crossing_events(firsts: list[int], size: int, limit: int) -> list[int]:
    """The crossings before step `limit` as step * len(firsts) + position, sorted: the step-by-step order."""
    num_running = len(firsts)
    stride, end = size * num_running, limit * num_running
    events: list[int] = []
    for i, first in enumerate(firsts):
        if first < limit:
            events.extend(range(first * num_running + i, end, stride))
    events.sort()
    return events


def crossing_limit(
    scheduler: Scheduler,
    refusals: list[Refusal],
    firsts: list[int],
    counts: list[int],
    limit: int,
) -> int:
    """The stretch cut before the first step whose block crossings would preempt, or would change the
    outcome of admitting a refused request (a lost cache hit, less room for its tenant)."""
    running, bm = scheduler.running, scheduler.block_manager
    num_running, num_free = len(running), bm.num_free_blocks
    if not bm.tenant_block_quota and not refusals:  # only the first crossing the pool lacks counts
        # the step of crossing number num_free (from 0): the last k with counts[k] <= num_free
        return limit if counts[limit] <= num_free else bisect_right(counts, num_free) - 1
    events = crossing_events(firsts, scheduler.block_size, limit)
    watched: dict[int, list[tuple[Refusal, int]]] = {}
    for refusal in refusals:
        for index in refusal.free_hits:
            watched.setdefault(refusal.hits[index], []).append((refusal, index))
    quota_watch = {r.req.tenant: r for r in refusals if r.blocked and r.room is not None}
    quotas = bm.tenant_block_quota
    taken = bm.iter_free_blocks() if watched else None
    used: dict[str, int] = {}
    changed: set[Refusal] = set()
    step_now = num_taken = 0
    for event in events:
        step = event // num_running
        if step >= limit:
            break
        if step != step_now:
            if changed and not all(r.still_refused(num_free - num_taken, used) for r in changed):
                return step_now
            changed.clear()
            step_now = step
        if num_taken >= num_free:
            return step  # no free block: it would preempt
        if quotas:
            tenant = running[event % num_running].tenant
            room = bm.tenant_headroom(tenant)
            if room is not None and room - used.get(tenant, 0) <= 0:
                return step  # over its tenant's quota: it would preempt
            if tenant in quota_watch:
                changed.add(quota_watch[tenant])
            used[tenant] = used.get(tenant, 0) + 1
        num_taken += 1
        if taken is not None:
            for refusal, index in watched.get(next(taken), ()):
                refusal.lose_hits(index)
                changed.add(refusal)
    if changed and not all(r.still_refused(num_free - num_taken, used) for r in changed):
        return step_now
    return limit


def refused_requests(scheduler: Scheduler, out: SchedulerOutput) -> list[Request] | None:
    """The waiting requests each intermediate `schedule()` would examine (and must refuse again): none
    when admission cannot even be tried; None when the queue no longer matches `out`."""
    config, waiting = scheduler.config, scheduler.waiting
    num_running = len(scheduler.running)
    if (
        config.policy != "continuous"
        or not waiting
        or num_running >= config.max_num_seqs
        or config.max_num_batched_tokens - num_running <= 0
    ):
        return []
    refused = list(islice(waiting, out.num_skipped + (out.blocked is not None)))
    if out.blocked is None:
        return refused if len(refused) == len(waiting) else None
    return refused if refused and refused[-1] is out.blocked else None


class Refusal:
    """A waiting request `schedule()` refused: passed over for its tenant's quota, or (`blocked`) stopped
    for lack of free blocks; re-checked whenever a crossing evicts one of its hits or eats its tenant's room."""

    __slots__ = ("req", "blocked", "hits", "num_hits", "free_hits", "room", "budget", "size")

    def __init__(self, scheduler: Scheduler, req: Request, blocked: bool):
        bm = scheduler.block_manager
        self.req, self.blocked, self.size = req, blocked, scheduler.block_size
        self.hits = bm.get_computed_blocks(req)
        self.num_hits = len(self.hits)
        self.free_hits = [i for i, block in enumerate(self.hits) if bm.ref_counts[block] == 0]
        self.room = bm.tenant_headroom(req.tenant)
        self.budget = scheduler.config.max_num_batched_tokens - len(scheduler.running)

    def lose_hits(self, index: int) -> None:
        """The hit at `index` was evicted: the chain of hits now ends before it."""
        self.num_hits = min(self.num_hits, index)

    def still_refused(self, num_free: int, used: dict[str, int]) -> bool:
        """Whether `schedule()` would refuse it the same way with `num_free` free blocks left, its tenant
        having taken `used[tenant]` more blocks (the same test as `admission.admit_waiting`)."""
        num_hits, size = self.num_hits, self.size
        num_cached = num_hits * size
        need = blocks_for(num_cached + min(self.req.num_tokens - num_cached, self.budget), size)
        over_quota = self.room is not None and need > self.room - used.get(self.req.tenant, 0)
        if not self.blocked:
            return over_quota
        revived = sum(1 for i in self.free_hits if i < num_hits)
        return not over_quota and need - num_hits + revived > num_free


def registration_limit(scheduler: Scheduler, refusals: list[Refusal], limit: int) -> int:
    """The stretch cut after the first step whose `update()` could register a block a refused request
    would then hit: one of a running request whose tokens so far are a refused request's prefix."""
    size = scheduler.block_size
    for refusal in refusals:
        req = refusal.req  # its full blocks are hashed (`get_computed_blocks`)
        hashes, num_full = req.block_hashes, (req.num_tokens - 1) // size
        for other in scheduler.running:
            have = other.num_hashed_blocks
            if have >= num_full:
                continue  # what it registers next, req never looks up
            computed = other.num_computed_tokens
            step = (have + 1) * size - computed - 1  # the update that fills its next block
            if step + 1 >= limit:
                continue
            if have and other.block_hashes[have - 1] != hashes[have - 1]:
                continue  # another prefix
            if other.token_ids(have * size, computed + 1) != req.token_ids(
                have * size, computed + 1
            ):
                continue
            limit = step + 1 if step > 0 else 1
            if limit == 1:
                return 1
    return limit
