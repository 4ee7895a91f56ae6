"""SLO-aware dynamic batch sizing: the scheduler's effective `max_num_seqs` and token budget, adapted
from the observed time per output token and the waiting queue. Pure Python (never torch), shared by
the live engine and the simulator like the rest of `engine.core`.

Large batches buy throughput with longer steps; once steps make each running request's tokens come
slower than the target time per output token (TPOT), more batching only hurts. The controller keeps
both limits between a floor and the configured caps: when the observed TPOT is above the target it
cuts the token budget (a smaller prefill chunk makes mixed prefill+decode steps shorter) and, once
that is at its floor, holds admissions below the running count (multiplicative decrease); when TPOT
is comfortably below the target (< 80%) and requests are waiting, it raises them again
(multiplicative increase). At most one change a second, so each shows in the average before the
next. Requests already running are never preempted by a cut: it takes effect as they finish, as in
vLLM.

Observed TPOT: the oldest running request's time per output token between two decisions, smoothed
by an exponential average with time constant `_SMOOTHING_S`. Decisions are taken at `schedule()`
calls where the set of requests has changed since the previous call (an arrival, a finish, an
abort, an admission or a preemption): between such events the scheduler only repeats pure decode
steps, so a decision could change nothing there. This also makes the simulator's decode stretches
(many such steps at once, `engine.core.decode_stretch`) exact with the controller on: the calls they
skip are exactly the calls at which the controller does nothing.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from engine.core.config import SchedulerConfig

if TYPE_CHECKING:
    from engine.core.scheduler import Scheduler

_SMOOTHING_S = 2.0  # time constant of the TPOT average
_HOLD_S = 1.0  # at most one change a second: let the last one show in the average first
_DECREASE = 0.75  # factor on the limits when TPOT is over the target
_INCREASE = 1.25  # factor when it is comfortably under and requests wait
_COMFORT = 0.8  # "comfortably under": below this share of the target
_MIN_SEQS = 8  # floors (or the caps, when those are lower)
_MIN_TOKENS = 256


def make_controller(config: SchedulerConfig) -> SLOBatchController | None:
    """The controller `config.batch_controller` names; None for `fixed` (the limits as configured)."""
    if config.batch_controller == "fixed":
        return None
    return SLOBatchController(config)


class SLOBatchController:
    def __init__(self, config: SchedulerConfig):
        self.base = config
        self.target_tpot_s = config.batch_target_tpot_s
        self.max_seqs, self.max_tokens = config.max_num_seqs, config.max_num_batched_tokens
        self.min_seqs, self.min_tokens = (
            min(_MIN_SEQS, self.max_seqs),
            min(_MIN_TOKENS, self.max_tokens),
        )
        self.seqs, self.tokens = self.max_seqs, self.max_tokens
        self.tpot_s: float | None = None  # smoothed observation
        self.num_decisions = 0
        self.history: list[
            tuple[float, int, int, float | None]
        ] = []  # (now, seqs, tokens, tpot) per change
        self._configs = {(self.seqs, self.tokens): config}
        self._signature: tuple[int, int] | None = None
        self._anchor = None  # (request, its output tokens, time, its preemptions)
        self._changed_s = -math.inf

    def adapt(self, scheduler: Scheduler, now: float) -> SchedulerConfig:
        """The config `schedule()` should use now (the same object while the limits stay)."""
        signature = (len(scheduler.waiting), len(scheduler.running))
        if signature != self._signature:
            self._signature = signature
            self._decide(scheduler, now)
        return self._configs[(self.seqs, self.tokens)]

    def _decide(self, scheduler: Scheduler, now: float) -> None:
        self.num_decisions += 1
        self._observe(scheduler, now)
        if self.tpot_s is None or now - self._changed_s < _HOLD_S:
            return
        seqs, tokens, running = self.seqs, self.tokens, len(scheduler.running)
        if self.tpot_s > self.target_tpot_s:
            if tokens > self.min_tokens:  # long mixed steps first: a smaller prefill chunk per step
                tokens = max(self.min_tokens, math.floor(tokens * _DECREASE))
            else:  # then the batch itself: admit below the running count
                seqs = max(self.min_seqs, min(seqs, math.floor(running * _DECREASE)))
        elif self.tpot_s < _COMFORT * self.target_tpot_s and scheduler.waiting:
            if running >= seqs:
                seqs = min(self.max_seqs, max(seqs + 1, math.ceil(seqs * _INCREASE)))
            tokens = min(self.max_tokens, math.ceil(tokens * _INCREASE))
        if (seqs, tokens) != (self.seqs, self.tokens):
            self.seqs, self.tokens, self._changed_s = seqs, tokens, now
            if (seqs, tokens) not in self._configs:
                self._configs[(seqs, tokens)] = self.base.model_copy(
                    update={"max_num_seqs": seqs, "max_num_batched_tokens": tokens}
                )
            self.history.append((now, seqs, tokens, self.tpot_s))

    def _observe(self, scheduler: Scheduler, now: float) -> None:
        """Fold the anchor request's time per token since the last decision into the average; re-anchor
        on the oldest running request once the anchor has produced a token (or is gone)."""
        anchor = self._anchor
        if anchor is not None:
            request, tokens, since, preemptions = anchor
            gone = request.is_finished or request.num_preemptions != preemptions
            produced = request.num_tokens - request.num_prompt_tokens - tokens
            if not gone and produced < 1:
                return  # no token yet: keep measuring from `since`
            if not gone and now > since:
                observed = (now - since) / produced
                weight = 1.0 - math.exp(-(now - since) / _SMOOTHING_S)
                self.tpot_s = (
                    observed
                    if self.tpot_s is None
                    else self.tpot_s + weight * (observed - self.tpot_s)
                )
        self._anchor = None
        for request in scheduler.running:  # oldest first; one that has started decoding
            output = request.num_tokens - request.num_prompt_tokens
            if output >= 1:
                self._anchor = (request, output, now, request.num_preemptions)
                break
