"""The one scheduler, shared by the live engine and the simulator. Pure Python: never imports torch.

vLLM v1's rule: every request's `num_computed_tokens` catches up with its token count. Each step hands
a token budget to running requests first (oldest first), then admits waiting ones (FCFS), so chunked
prefill and mixed prefill+decode steps fall out of one loop. When blocks run out, the newest running
request is preempted and later recomputed. The `static` policy admits a batch together, each request
reserving contiguous KV for its longest possible sequence, and admits nothing until the batch drains.
What a step returns and the pool's figures are `engine.core.scheduler_output`'s; who is admitted and
how much KV each takes, `engine.core.admission`'s; many decode steps at once, `engine.core.decode_stretch`'s.
"""

from collections import deque
from collections.abc import Sequence

from engine.core import admission, decode_stretch, kv_handoff, new_token_ratio
from engine.core.batch_controller import make_controller
from engine.core.batch_wait import BatchWait
from engine.core.block_manager import BlockManager, blocks_for
from engine.core.config import CacheConfig, SchedulerConfig
from engine.core.host_tier import HostKVTier
from engine.core.request import Request, RequestStatus
from engine.core.scheduler_output import KVStats, SchedulerOutput
from engine.core.step_shape import StepShape


class Scheduler:
    def __init__(
        self,
        scheduler_config: SchedulerConfig,
        cache_config: CacheConfig,
        eos_token_ids: frozenset[int] = frozenset(),
    ):
        self.config = scheduler_config
        self.block_size = cache_config.block_size
        caching = cache_config.enable_prefix_caching and scheduler_config.policy == "continuous"
        self.block_manager = BlockManager(
            cache_config.num_kv_blocks,
            cache_config.block_size,
            caching,
            cache_config.tenant_block_quota,
        )
        if cache_config.num_cpu_kv_blocks and caching:
            self.block_manager.host_tier = HostKVTier(
                cache_config.num_cpu_kv_blocks, cache_config.block_size
            )
        self.eos_token_ids = frozenset(eos_token_ids)
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        # Σ num_computed_tokens and Σ len(block_table) over `running`, kept up to date wherever either
        # changes (`_start_running`, `_left_running`, block growth, `update`, `advance_decodes`), so the
        # KV utilisation the simulator reads after every step is O(1) (`_stored_and_reserved_slots`)
        self._running_computed = 0
        self._running_blocks = 0
        self.num_preemptions = 0
        # the requests of the last `update` / `advance_decodes` whose first token came or that may have
        # stopped, in scheduled order: a superset of those that are news to a client (first token now,
        # or finished), so an observer filters a few instead of every request that got a token
        self.news: list[Request] = []
        # SGLang's admission (engine.core.new_token_ratio): the reserve ratio, None under other policies
        self.new_token_ratio = (
            new_token_ratio.NewTokenRatio()
            if scheduler_config.admission == "new_token_ratio"
            else None
        )
        self.controller = make_controller(scheduler_config)  # None: the limits stay as configured
        # TensorRT-LLM's batch waiting (engine.core.batch_wait): None when prompts are never held
        self.batch_wait = (
            BatchWait(
                scheduler_config.batch_wait_steps, scheduler_config.batch_wait_max_tokens_ratio
            )
            if scheduler_config.batch_wait_steps
            else None
        )
        # disaggregation (engine.core.kv_handoff): the prefill role's handed-over requests, holding blocks;
        # the decode role's requests whose KV comes from elsewhere (counted in `num_handoffs`)
        self.hands_over = scheduler_config.role == "prefill"
        self.outbox: list[Request] = []
        self.handoffs = kv_handoff.HandoffQueues()
        self.arrived = self.handoffs.arrived
        self.num_handoffs = 0

    # ---- requests in and out -----------------------------------------------------------------------
    def add_request(self, request: Request) -> None:
        self.waiting.append(request)

    def has_unfinished_requests(self) -> bool:
        return bool(self.waiting or self.running or self.num_handoffs)

    @property
    def num_unfinished_requests(self) -> int:
        return len(self.waiting) + len(self.running) + self.num_handoffs

    def abort_request(self, request: Request, now: float) -> None:
        if request.is_finished:
            if request.status is RequestStatus.HANDED_OVER:  # its KV is no longer wanted
                if request in self.outbox:
                    self.outbox.remove(request)
                kv_handoff.release_handed_over(self, request)
            return
        if request.status is RequestStatus.RUNNING:
            self.running.remove(request)
            self._left_running(request)
        elif self.num_handoffs and kv_handoff.abort_handoff(self, request):
            self.num_handoffs -= 1
        else:
            self.waiting.remove(request)
        self._finish(request, RequestStatus.FINISHED_ABORTED, now)

    # ---- disaggregation: see engine.core.kv_handoff ------------------------------------------------
    def take_handed_over(self) -> list[Request]:
        """Prefill role: the requests handed over since the last call (each still holds its blocks)."""
        return kv_handoff.take_outbox(self)

    def take_back(self, request: Request, now: float) -> None:
        """Prefill role: decode a request taken from `take_handed_over` here instead (no KV copy)."""
        kv_handoff.take_back(self, request, now)

    def release_handed_over(self, request: Request) -> None:
        """Prefill role: the request's KV has been copied; free its blocks."""
        kv_handoff.release_handed_over(self, request)

    def receive(self, request: Request) -> None:
        """Decode role: queue a hand-over (`kv_handoff.handoff_copy` of the prefill side's request)."""
        kv_handoff.receive(self, request)
        self.num_handoffs += 1

    def start_receives(self) -> list[Request]:
        """Decode role: reserve blocks for queued hand-overs; returns those whose KV copy may start."""
        return kv_handoff.start_receives(self) if self.handoffs.incoming else []

    def finish_receive(self, request: Request) -> None:
        """Decode role: the request's KV has arrived in its blocks."""
        kv_handoff.finish_receive(self, request)

    def max_blocks_needed(self, request: Request) -> int:
        """Blocks the request may hold at its longest: what must fit in the pool for it ever to finish."""
        if self.config.policy == "static":
            return blocks_for(admission.static_reserve_len(self.config, request), self.block_size)
        return blocks_for(min(request.max_num_tokens, self.config.max_model_len), self.block_size)

    # ---- one step ----------------------------------------------------------------------------------
    def schedule(self, now: float) -> SchedulerOutput:
        if self.controller is not None:  # SLO-aware batch sizing: this step's effective limits
            self.config = self.controller.adapt(self, now)
        out = SchedulerOutput()
        if self.new_token_ratio is not None and not self.running:  # idle: SGLang resets the ratio
            self.new_token_ratio.set(self.new_token_ratio.init)
        if self.config.policy == "static" and not self.running:
            admission.admit_static_batch(self, out, now)
        elif not self.config.mixed_steps and self.waiting:  # vLLM v0: waiting prompts go first
            admission.admit_waiting(self, out, self.config.max_num_batched_tokens, now, whole=True)
            if out.num_admitted:  # a prefill-only step: every running decode waits for it
                return self._finish_schedule(out)
            out = SchedulerOutput()
        budget = self._schedule_running(out, now)
        if self.config.policy == "continuous" and not out.preempted and self.config.mixed_steps:
            if self.arrived:  # decode role: hand-overs whose KV is here go first
                admitted = out.num_admitted
                budget = kv_handoff.admit_arrived(self, out, budget, now)
                self.num_handoffs -= out.num_admitted - admitted
            if out.blocked is None and not (
                self.batch_wait is not None and self.batch_wait.holds(self, out, budget)
            ):
                admission.admit_waiting(self, out, budget, now)
        return self._finish_schedule(out)

    def _finish_schedule(self, out: SchedulerOutput) -> SchedulerOutput:
        if self.block_manager.host_tier is not None:
            out.host_loaded_blocks = self.block_manager.host_tier.take_loaded()
        out._shape = StepShape(tuple(out._prefill), tuple(out._decode))
        return out

    def _schedule_running(self, out: SchedulerOutput, now: float) -> int:
        budget, bm, size, i = (
            self.config.max_num_batched_tokens,
            self.block_manager,
            self.block_size,
            0,
        )
        running, scheduled, decode, prefill = self.running, out.scheduled, out._decode, out._prefill
        if self.new_token_ratio is not None and running:
            new_token_ratio.retract_if_short(self, out)  # SGLang: retract, or decay the ratio
        num_running = len(running)  # (less after a preemption)
        while i < num_running and budget > 0:
            req = running[i]
            computed = req.num_computed_tokens
            num_new = req.num_tokens - computed
            if num_new > budget:
                num_new = budget
            target = computed + num_new
            if target > len(req.block_table) * size:  # it needs blocks (a decode mostly does not)
                held = len(req.block_table)
                while not bm.grow(req, target):  # (`allocate` once `can_allocate`)
                    victim = self._pick_victim(req, i)
                    self._preempt(victim)
                    out.preempted.append(victim)
                    if victim is req:
                        break
                num_running = len(running)
                if req.status is not RequestStatus.RUNNING:
                    continue
                self._running_blocks += len(req.block_table) - held
            scheduled.append((req, num_new))
            if num_new == 1 and computed:  # as `SchedulerOutput.shape` tells them apart
                decode.append(target)
            else:
                prefill.append((num_new, computed))
            budget -= num_new
            i += 1
        return budget

    def _pick_victim(self, req: Request, first_unscheduled: int) -> Request:
        """The newest running request not yet scheduled this step; of the same tenant when it is the
        tenant's quota, not the pool, that is exhausted."""
        candidates = self.running[first_unscheduled:]
        headroom = self.block_manager.tenant_headroom(req.tenant)
        if headroom is not None and headroom <= 0:
            candidates = [r for r in candidates if r.tenant == req.tenant]
        return candidates[-1]

    def _preempt(self, req: Request) -> None:
        self.running.remove(req)
        self._left_running(req)
        self.block_manager.free(req)
        req.status = RequestStatus.WAITING
        req.num_computed_tokens = 0
        req.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(req)

    def _start_running(self, req: Request, now: float) -> None:
        req.status = RequestStatus.RUNNING
        params = req.params  # what `_stop_status` checks, summed up so most tokens skip it
        req.stop_len = min(req.num_prompt_tokens + params.max_tokens, self.config.max_model_len)
        req.stops_on_token = bool(params.stop_token_ids) or (
            not params.ignore_eos and bool(self.eos_token_ids)
        )
        if req.first_scheduled_time is None:
            req.first_scheduled_time = now
        self.running.append(req)
        self._running_computed += req.num_computed_tokens
        self._running_blocks += len(req.block_table)

    def _left_running(self, req: Request) -> None:
        """`req` has just been taken out of `running` (before its blocks are freed or its counts reset)."""
        self._running_computed -= req.num_computed_tokens
        self._running_blocks -= len(req.block_table)

    # ---- after the step ----------------------------------------------------------------------------
    def update(
        self, out: SchedulerOutput, sampled_token_ids: list[int | None], now: float
    ) -> list[Request]:
        """Advance the scheduled requests; `sampled_token_ids[i]` is the token of scheduled[i] (None when
        its step did not reach the end of its tokens; a request's `uniform_output_token`, when set, is
        taken as its token). Returns the requests that got a token."""
        progressed, may_stop, news = [], [], []
        bm, size, running_status = self.block_manager, self.block_size, RequestStatus.RUNNING
        caching = bm.enable_prefix_caching
        num_computed = 0  # what `running` computes this step
        for (req, num_new), token in zip(out.scheduled, sampled_token_ids):
            if req.status is not running_status:
                continue  # aborted while the step ran
            computed = req.num_computed_tokens = req.num_computed_tokens + num_new
            num_computed += num_new
            if caching and computed // size > req.num_hashed_blocks:
                bm.cache_full_blocks(req)
            num_tokens = req.num_tokens
            if computed < num_tokens:
                continue  # a prefill chunk: no token yet
            assert token is not None, f"{req} completed its tokens but no token was sampled"
            if req.uniform_output_token is None:  # (else counted in num_tokens, not stored)
                req._output_token_ids.append(token)  # `append_output_token`, inlined: the hot loop
            req.num_tokens = num_tokens = num_tokens + 1
            first_token = req.first_token_time is None
            if first_token:
                req.first_token_time = now
            progressed.append(req)
            if num_tokens >= req.stop_len or req.stops_on_token:
                may_stop.append((req, token))
                news.append(req)
            elif first_token:
                news.append(req)
        self.news = news
        self._running_computed += num_computed
        if may_stop:
            self.finish_stopped(may_stop, now)
        if self.hands_over and progressed:  # prefill role: first tokens leave for a decode instance
            kv_handoff.hand_over(self, progressed)
        return progressed

    def finish_stopped(self, candidates: list[tuple[Request, int]], now: float) -> None:
        """Finish, in order, each running request the token just appended to it stops. (Freeing its
        blocks after the step's prefix-cache registrations rather than between them changes nothing: a
        registration touches only unregistered blocks, which only their one holder has.)"""
        running = self.running
        for req, token in candidates:
            status = self._stop_status(req, token)
            if status is not None:
                running.remove(req)  # (the others keep their order)
                self._left_running(req)
                self._finish(req, status, now)

    def _stop_status(self, req: Request, token: int) -> RequestStatus | None:
        params = req.params
        num_output = req.num_tokens - req.num_prompt_tokens
        if num_output >= params.min_tokens and (
            token in params.stop_token_ids
            or (not params.ignore_eos and token in self.eos_token_ids)
        ):
            return RequestStatus.FINISHED_STOPPED
        if num_output >= params.max_tokens or req.num_tokens >= self.config.max_model_len:
            return RequestStatus.FINISHED_LENGTH
        return None

    def _finish(self, req: Request, status: RequestStatus, now: float) -> None:
        req.status = status
        req.finish_time = now
        self.block_manager.free(req)

    # ---- many decode steps at once (the simulator) ------------------------------------------------
    def decode_stretch(self, out: SchedulerOutput, max_steps: int) -> int:
        """`out` was just returned by `schedule()`. How many consecutive steps n (1 ≤ n ≤ max_steps),
        `out`'s own included, step-by-step scheduling would make with exactly the same running requests,
        each decoding one token, if nothing outside the scheduler happens (no arrival, no abort): no
        admission, no preemption, and no finish before the last of them. 1 when `out` is not a pure
        decode step or nothing is gained. See `engine.core.decode_stretch` for how it is proved."""
        return decode_stretch.stretch_length(self, out, max_steps)

    def decode_stretch_ignores_arrivals(self, out: SchedulerOutput) -> bool:
        """Whether requests added to the waiting queue while `out`'s decode stretch runs would go
        unexamined by each of its steps' `schedule()`, so that the engine, seeing them at the end of
        a step, would go on with the same stretch (see `decode_stretch.ignores_arrivals`)."""
        return decode_stretch.ignores_arrivals(self, out)

    def decode_stretch_kv(self, out: SchedulerOutput, num_steps: int) -> tuple[float, int, float]:
        """Before `advance_decodes`: (`kv_utilization()` and `num_used_blocks` as they would read after
        `num_steps` steps of `out`'s stretch, `kv_utilization()` after the next `schedule()`)."""
        return decode_stretch.kv_after(self, out, num_steps)

    def advance_decodes(
        self, out: SchedulerOutput, num_steps: int, step_end_times: Sequence[float], token_id: int
    ) -> list[Request]:
        """Exactly the effect of `num_steps` rounds of `update(out_k, [token_id] * len, now=step_end_times[k])`
        followed (except after the last) by `out_{k+1} = schedule(now=step_end_times[k])`, out_0 = `out`,
        for num_steps ≤ `decode_stretch(out, ...)`. Returns the requests that got a token in the last step;
        the caller calls `schedule()` next, as after `update()`."""
        # SGLang's reserve ratio decays at each schedule() of the stretch after `out`'s
        if self.new_token_ratio is not None:
            self.new_token_ratio.steps += num_steps - 1
        return decode_stretch.advance(self, out, num_steps, step_end_times, token_id)

    # ---- accounting --------------------------------------------------------------------------------
    def kv_stats(self) -> KVStats:
        """O(running): only running requests hold blocks, and a block two of them share is a full
        prefix-cache block, so it counts `block_size` stored tokens once."""
        bm = self.block_manager
        stored, used_slots = self._stored_and_reserved_slots()
        return KVStats(
            bm.num_blocks,
            bm.num_used_blocks,
            bm.num_free_blocks,
            bm.num_cached_free_blocks,
            stored,
            used_slots,
        )

    def kv_utilization(self) -> float:
        """`kv_stats().utilization` without building the stats: the simulator reads it after every step."""
        stored, used_slots = self._stored_and_reserved_slots()
        return stored / used_slots if used_slots else 1.0

    def _stored_and_reserved_slots(self) -> tuple[int, int]:
        """(token slots holding a running request's KV, each shared block once; slots of used blocks).
        A running request's computed tokens lie in its blocks (they were allocated for them), so it stores
        `num_computed_tokens` slots; a block k running requests share is counted k times in the sums."""
        size = self.block_size
        used_slots = self.block_manager.num_used_blocks * size
        return self._running_computed - (self._running_blocks * size - used_slots), used_slots
