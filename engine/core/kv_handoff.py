"""Prefill/decode disaggregation in the one scheduler: the prefill role hands a request over, the
decode role takes it in. Pure Python (shared by the live engine and the simulator).

The hand-over follows vLLM's disaggregated prefill (the prefill instance runs the request as if its
`max_tokens` were 1 and keeps its KV blocks after it finishes, until the decode instance has pulled
them; DistServe and Splitwise move the KV the same way):

- **prefill role** (`SchedulerConfig.role == "prefill"`): a request that gets its first token and would
  go on decoding is marked `HANDED_OVER` instead, leaves `running`, and waits in `scheduler.outbox`,
  still holding its blocks. Whoever moves the KV calls `release_handed_over` once the copy is done.
  The cluster may instead `take_back` a request it took from the outbox: it then decodes here.
- **decode role** (`role == "decode"`): `receive(request)` queues a request that arrives with its prompt
  and first token (`handoff_copy`). `start_receives()` reserves blocks for the KV that already exists
  elsewhere (FCFS, as room allows) and returns the requests whose copy may start; the executor copies
  (tensors in the live engine, a timed link transfer in the simulator) and calls `finish_receive`.
  The next `schedule()` admits arrived requests before preempted ones, with their KV counted as
  computed, so their first step is the decode of the first output token, exactly the step a co-located
  engine would run next. A decode-side preemption frees the blocks and recomputes locally, as usual.

Co-located scheduling (`role == "both"`, the default) never enters this module: the scheduler checks one
flag after `update` and one empty list in `schedule`.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from engine.core.request import Request, RequestStatus

if TYPE_CHECKING:
    from engine.core.scheduler import Scheduler
    from engine.core.scheduler_output import SchedulerOutput


class HandoffQueues:
    """The decode role's requests whose KV is elsewhere: queued, being copied, arrived."""

    __slots__ = ("incoming", "receiving", "arrived")

    def __init__(self) -> None:
        self.incoming: deque[Request] = deque()  # received, no blocks yet
        self.receiving: dict[str, Request] = {}  # blocks reserved, KV in flight
        self.arrived: deque[Request] = deque()  # KV here: admitted by the next schedule()

    def __len__(self) -> int:
        return len(self.incoming) + len(self.receiving) + len(self.arrived)


def kv_tokens(request: Request) -> int:
    """Tokens whose KV the prefill side computed: all but the last (the first output token)."""
    return request.num_tokens - 1


def handoff_copy(request: Request) -> Request:
    """The request as the decode side receives it: prompt, sampled tokens, params and timings; no
    blocks (the decode side reserves its own in `start_receives`)."""
    copy = Request(
        request.request_id,
        request.prompt_token_ids,
        request.params,
        request.arrival_time,
        request.tenant,
    )
    copy.uniform_output_token = request.uniform_output_token
    copy.output_token_ids = request.output_token_ids
    copy.first_scheduled_time = request.first_scheduled_time
    copy.first_token_time = request.first_token_time
    copy.num_preemptions = request.num_preemptions
    copy.num_cached_tokens = request.num_cached_tokens
    copy.generator = request.generator
    return copy


# ---- prefill role ------------------------------------------------------------------------------
def hand_over(scheduler: Scheduler, progressed: list[Request]) -> None:
    """After `update`: every request that got its first token here and did not finish is handed over
    (one that `take_back` kept decodes its later tokens here)."""
    handed = False
    for req in progressed:
        if req.status is RequestStatus.RUNNING and req.num_tokens - req.num_prompt_tokens == 1:
            req.status = RequestStatus.HANDED_OVER
            scheduler.outbox.append(req)
            scheduler._left_running(req)  # (it keeps its blocks, out of `running`)
            handed = True
    if handed:
        scheduler.running[:] = [
            req for req in scheduler.running if req.status is RequestStatus.RUNNING
        ]


def take_outbox(scheduler: Scheduler) -> list[Request]:
    taken = list(scheduler.outbox)
    scheduler.outbox.clear()
    return taken


def take_back(scheduler: Scheduler, request: Request, now: float) -> None:
    """The hand-over is called off before any copy started: the request decodes here, on the blocks it
    holds (Splitwise's mixed pool: a prompt machine runs the token phase when no token machine has
    room). Its next step is the decode of its first output token, as on a co-located replica."""
    assert request.status is RequestStatus.HANDED_OVER and request not in scheduler.outbox, (
        f"{request} is not a hand-over taken from the outbox (expected `take_handed_over`'s)"
    )
    scheduler._start_running(request, now)


def release_handed_over(scheduler: Scheduler, request: Request) -> None:
    """The KV has been copied (or the hand-over abandoned): free the prefill side's blocks."""
    assert request.status is RequestStatus.HANDED_OVER, f"{request} was not handed over"
    if request.block_table:
        scheduler.block_manager.free(request)


# ---- decode role -------------------------------------------------------------------------------
def receive(scheduler: Scheduler, request: Request) -> None:
    assert not request.block_table and request.num_output_tokens >= 1, (
        f"{request} is not a hand-over (expected a `handoff_copy` with its first token and no blocks)"
    )
    request.status = RequestStatus.WAITING
    scheduler.handoffs.incoming.append(request)


def start_receives(scheduler: Scheduler) -> list[Request]:
    """Reserve blocks for queued hand-overs, FCFS while the pool (and tenant quota) allows; returns the
    requests whose KV copy may start now."""
    queues, bm, started = scheduler.handoffs, scheduler.block_manager, []
    while queues.incoming:
        req = queues.incoming[0]
        num_kv = kv_tokens(req)
        if not bm.can_allocate(req, num_kv):
            break
        queues.incoming.popleft()
        bm.allocate(req, num_kv)
        req.num_computed_tokens = num_kv
        queues.receiving[req.request_id] = req
        started.append(req)
    return started


def finish_receive(scheduler: Scheduler, request: Request) -> None:
    """The request's KV is in its blocks: the next `schedule()` may admit it."""
    del scheduler.handoffs.receiving[request.request_id]
    scheduler.handoffs.arrived.append(request)


def admit_arrived(scheduler: Scheduler, out: SchedulerOutput, budget: int, now: float) -> int:
    """Admit arrived hand-overs (before preempted requests): each decodes its first output token.
    Returns the budget left; sets `out.blocked` when the pool refuses one."""
    arrived, bm, config = scheduler.handoffs.arrived, scheduler.block_manager, scheduler.config
    while arrived and budget > 0 and len(scheduler.running) < config.max_num_seqs:
        req = arrived[0]
        num_new = req.num_tokens - req.num_computed_tokens
        if num_new > budget:
            num_new = budget
        if not bm.can_allocate(req, req.num_computed_tokens + num_new):
            out.blocked = req
            break
        arrived.popleft()
        bm.allocate(req, req.num_computed_tokens + num_new)
        scheduler._start_running(req, now)
        out.scheduled.append((req, num_new))
        if num_new == 1 and req.num_computed_tokens:  # the step's shape, as `schedule()` builds it
            out._decode.append(req.num_computed_tokens + 1)
        else:
            out._prefill.append((num_new, req.num_computed_tokens))
        out.num_admitted += 1
        budget -= num_new
    return budget


def abort_handoff(scheduler: Scheduler, request: Request) -> bool:
    """Remove a request from the decode role's queues (freeing any reserved blocks); False if absent."""
    queues = scheduler.handoffs
    if request in queues.incoming:
        queues.incoming.remove(request)
    elif queues.receiving.pop(request.request_id, None) is None:
        if request not in queues.arrived:
            return False
        queues.arrived.remove(request)
    scheduler.block_manager.free(request)
    return True
