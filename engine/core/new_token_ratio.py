"""SGLang 0.4's admission (`admission: new_token_ratio`): room reserved for the running requests' future
tokens, a reserve ratio that decays while decoding goes well, and retraction when it does not.

Pure Python; the scheduler's `new_token_ratio` policy, kept here so `engine.core.scheduler` stays one
concept. SGLang admits a waiting request only when its prompt plus its whole `max_new_tokens` fits in
the free pool less what the running requests may still need, each counted as `new_token_ratio` x its
remaining `max_new_tokens` (both clipped at 4,096); requests admitted in the same step count their
prompt plus their whole output (a prompt cut to the chunk budget counts only its chunk). The ratio
starts at 0.7, falls by (0.7 - 0.098) / 600 per decode step down to 0.7 x 0.14 = 0.098, is reset to
0.7 when the server idles, and, when a decode step finds no room for the next token of every running
request, SGLang retracts (preempts, to recompute later) the requests with the fewest output tokens
(the longest prompt first among them) until the pool has room for 20 decode steps of the rest, sends
them to the back of the queue, and raises the ratio to (tokens decoded + 20 x running) / Σ max_new_tokens
of the requests left, at most 1.

Source (read 2026-12-04 in v0.4.x copies of sgl-project/sglang in the code index, the same rule in
each; the v0.4.0 commit itself, 2024-12-04, was not reachable): `python/sglang/global_config.py`
(`default_init_new_token_ratio` 0.7, `default_min_new_token_ratio_factor` 0.14,
`default_new_token_ratio_decay_steps` 600, `retract_decode_steps` 20), `python/sglang/srt/managers/
scheduler.py` (`Scheduler.__init__`: ratio, floor, decay; `update_running_batch`: decay or retract;
the idle branch of the event loop: reset), `python/sglang/srt/managers/schedule_policy.py`
(`PrefillAdder.__init__` / `add_one_req` / `_prefill_one_req`, `CLIP_MAX_NEW_TOKENS_ESTIMATION` 4096),
`python/sglang/srt/managers/schedule_batch.py` (`check_decode_mem`, `retract_decode`).

Modelled in blocks: free room is free blocks x block size; a decode step lacks room when the running
requests crossing into a new block this step outnumber the free blocks (SGLang's pages are one token).
Not modelled: `batch_is_full` (SGLang skips the admission test after a refusal until a request
finishes), the chunked request SGLang keeps outside the running batch (here it reserves as a running
one), and the reset is at a `schedule()` that finds nothing running.

The ratio is kept as a base and a count of decode steps since it was set, so a decode stretch of n
steps (`Scheduler.advance_decodes`) moves it exactly as n single steps do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.core.request import Request
    from engine.core.scheduler import Scheduler
    from engine.core.scheduler_output import SchedulerOutput

# global_config.default_init_new_token_ratio x schedule_conservativeness 1
INIT_NEW_TOKEN_RATIO = 0.7
MIN_NEW_TOKEN_RATIO_FACTOR = 0.14  # global_config.default_min_new_token_ratio_factor
NEW_TOKEN_RATIO_DECAY_STEPS = 600  # global_config.default_new_token_ratio_decay_steps
RETRACT_DECODE_STEPS = 20  # global_config.retract_decode_steps
CLIP_MAX_NEW_TOKENS = 4096  # schedule_policy.CLIP_MAX_NEW_TOKENS_ESTIMATION


class NewTokenRatio:
    """SGLang's `new_token_ratio`: max(base - steps x decay, floor) once it has decayed, base before."""

    __slots__ = ("init", "floor", "decay", "base", "steps")

    def __init__(self) -> None:
        self.init = INIT_NEW_TOKEN_RATIO
        self.floor = INIT_NEW_TOKEN_RATIO * MIN_NEW_TOKEN_RATIO_FACTOR
        self.decay = (self.init - self.floor) / NEW_TOKEN_RATIO_DECAY_STEPS
        self.base, self.steps = self.init, 0

    @property
    def value(self) -> float:
        if not self.steps:
            return self.base
        decayed = self.base - self.steps * self.decay
        return decayed if decayed > self.floor else self.floor

    def set(self, base: float) -> None:
        self.base, self.steps = base, 0


def room_tokens(scheduler: Scheduler) -> float:
    """The pool's free tokens less the running requests' reserve (`PrefillAdder.rem_total_tokens`)."""
    ratio = scheduler.new_token_ratio.value
    reserve = 0
    for req in scheduler.running:
        remaining = req.params.max_tokens - req.num_output_tokens
        reserve += remaining if remaining < CLIP_MAX_NEW_TOKENS else CLIP_MAX_NEW_TOKENS
    return scheduler.block_manager.num_free_blocks * scheduler.block_size - ratio * reserve


def request_tokens(req: Request, num_cached: int) -> int:
    """What admitting `req` must find room for: its uncomputed prompt and its whole output."""
    return req.num_tokens - num_cached + min(req.params.max_tokens, CLIP_MAX_NEW_TOKENS)


def admitted_tokens(req: Request, num_cached: int, num_new: int) -> int:
    """What an admitted request takes from the room: all of `request_tokens`, or its chunk if cut."""
    if num_new < req.num_tokens - num_cached:
        return num_new
    return request_tokens(req, num_cached)


def retract_if_short(scheduler: Scheduler, out: SchedulerOutput) -> None:
    """Before a step of the running requests: when the decodes crossing into a new block outnumber
    the free blocks, retract as SGLang does and raise the ratio; else the step decays it."""
    running, bm, size = scheduler.running, scheduler.block_manager, scheduler.block_size
    crossing = 0
    for req in running:
        computed = req.num_computed_tokens
        if req.num_tokens - computed == 1 and computed + 1 > len(req.block_table) * size:
            crossing += 1
    if crossing <= bm.num_free_blocks:
        scheduler.new_token_ratio.steps += 1
        return
    order = sorted(
        running,
        key=lambda r: (r.num_output_tokens, -r.num_prompt_tokens),
        reverse=True,
    )
    first = True
    while first or bm.num_free_blocks * size < len(order) * RETRACT_DECODE_STEPS:
        if len(order) == 1:
            break
        first = False
        victim = order.pop()
        scheduler._preempt(victim)  # (it queues the victim first; SGLang queues it last)
        scheduler.waiting.append(scheduler.waiting.popleft())
        out.preempted.append(victim)
    decoded = sum(r.num_output_tokens for r in order)
    max_new = sum(r.params.max_tokens for r in order)
    ratio = (decoded + RETRACT_DECODE_STEPS * len(order)) / max_new if max_new else 1.0
    scheduler.new_token_ratio.set(ratio if ratio < 1.0 else 1.0)
