"""One engine replica in simulated time: the engine's own `Scheduler`, timed by the cost model.

`Replica.step()` reads line for line like `LLMEngine.step`: schedule, `yield
env.timeout(step_time(shape))`, update; `Replica.run` around it only waits (cold start, idle,
drain).
Where the shared scheduler proves that the next steps are pure decodes of the same requests
(`Scheduler.decode_stretch`), they are advanced at once (`Scheduler.advance_decodes`), with exactly
the per-request results of stepping. A stretch ends before the next observation (metrics window,
autoscaler scrape); an arrival or an abort in the middle of one cuts it after the step in progress,
as the engine would see the change only at its next `schedule()`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import simpy

from engine.core.request import Request
from engine.core.scheduler import Scheduler
from engine.core.step_shape import DecodeCounts
from simulator.calibration.cost_model import StepTimer

if TYPE_CHECKING:
    from engine.core.scheduler_output import SchedulerOutput

try:  # present with the `compiled` extra (mypyc); a no-op decorator for the pure-Python modules
    from mypy_extensions import mypyc_attr
except ImportError:  # pragma: no cover - depends on the install

    def mypyc_attr(*args, **kwargs):  # type: ignore[misc]
        return lambda cls: cls


SIM_TOKEN_ID = 0  # every simulated sampled token (requests stop on max_tokens, ignore_eos)
STARTING, SERVING, DRAINING, STOPPED = "starting", "serving", "draining", "stopped"


@mypyc_attr(allow_interpreted_subclasses=True)  # the disaggregated roles subclass it
class Replica:
    # a decode stretch goes on past arrivals its steps would not examine (`_ride_out`); off where
    # a step's end does more than the accounts (disaggregated roles, prefix-affinity routing reading
    # the prefix cache mid-stretch)
    rides_out_arrivals = True

    def __init__(
        self,
        env: simpy.Environment,
        replica_id: int,
        scheduler: Scheduler,
        cost_model: StepTimer,
        ready_at_s: float,
        on_progress: Callable[[Request], None],
        next_observation_s: Callable[[float], float],
        max_stretch_steps: int = 256,
        on_stopped: Callable[[Replica], None] | None = None,
        on_load_change: Callable[[Replica], None] | None = None,
    ):
        self.env = env
        self.replica_id = replica_id
        self.scheduler = scheduler
        self.cost_model = cost_model
        self.requested_at_s = env.now
        self.ready_at_s = ready_at_s
        self.stopped_at_s: float | None = None
        self.state = STARTING if ready_at_s > env.now else SERVING
        self.on_progress = on_progress
        self.next_observation_s = next_observation_s
        self.max_stretch_steps = max_stretch_steps
        self.on_stopped = on_stopped
        self.on_load_change = on_load_change  # after anything that may change what a router reads
        self.num_steps = 0
        self.busy_s = 0.0
        self.kv_utilization_busy_s = (
            0.0  # Σ KV utilisation after a step × its time: the live engine's measure
        )
        self.step_shapes: list | None = (
            None  # set to [] to record every step's shape (fidelity tests)
        )
        self._wake: simpy.Event | None = None  # set while idle or inside a stretch
        self._changed = False  # poked by anything but an arrival since the stretch began
        # the engine profile's wake-up cost, paid by the first step after idleness (0 for a bare cost model)
        self.wake_s = getattr(cost_model, "wake_s", 0.0)
        # the profile's API-server latency per request: the cluster hands a request over that long
        # after sending it (0 for a bare cost model or an offline profile)
        self.front_end_s = getattr(cost_model, "front_end_s", 0.0)
        self._in_front_end: set[str] = set()  # ids of requests sent here, still in its API server
        self._woke = False
        # the state as of the last completed step, which observers (metrics, autoscaler) read
        self.snapshot = (0, 0, 0)  # (waiting, running, used blocks)
        self.process = env.process(self.run())

    # ---- what the router and the clients call --------------------------------------------------
    @property
    def num_outstanding(self) -> int:
        """Requests sent here and not ended: in its API server, waiting or running (what a router
        counts of its own sends)."""
        return self.scheduler.num_unfinished_requests + len(self._in_front_end)

    @property
    def kv_usage(self) -> float:
        return self.snapshot[2] / self.scheduler.block_manager.num_blocks

    def add_request(self, request: Request) -> None:
        self.scheduler.add_request(request)
        self._load_changed()
        self._poke(arrival=True)

    def enter_front_end(self, request: Request) -> None:
        """A request sent here is in the API server (`front_end_s`): counted, not yet scheduled."""
        self._in_front_end.add(request.request_id)
        self._load_changed()

    def leave_front_end(self, request: Request, to_scheduler: bool) -> bool:
        """The request leaves the API server, to the scheduler or abandoned by its client (a
        draining replica then re-checks whether it may stop); False if it was not there."""
        if request.request_id not in self._in_front_end:
            return False
        self._in_front_end.discard(request.request_id)
        if to_scheduler:
            self.add_request(request)
        else:
            self._load_changed()
            self._poke()
        return True

    def abort_request(self, request: Request) -> None:
        self.scheduler.abort_request(request, self.env.now)
        self._load_changed()
        self._poke()

    def _load_changed(self) -> None:
        if self.on_load_change is not None:
            self.on_load_change(self)

    def drain(self) -> None:
        """Take no new requests; stop once the last one is done."""
        if self.state in (STARTING, SERVING):
            self.state = DRAINING
            self._poke()

    def _poke(self, arrival: bool = False) -> None:
        if not arrival:  # anything but an arrival may change what the next `schedule()` does
            self._changed = True
        if self._wake is not None and not self._wake.triggered:
            self._wake.succeed()

    # ---- the loop ----------------------------------------------------------------------------------
    def run(self):
        """The replica's life: cold start, then steps while there is work, idle waits while there is
        none, and a stop once draining has emptied it. It only waits; each step is `step()`."""
        if self.ready_at_s > self.env.now:
            yield self.env.timeout(self.ready_at_s - self.env.now)  # cold start
            if self.state == STARTING:
                self.state = SERVING
        while True:
            if not self.scheduler.has_unfinished_requests():
                if self.state == DRAINING and not self._in_front_end:
                    break
                yield from self._idle()
                continue
            stepped = yield from self.step()
            if not stepped:  # nothing admissible until something changes
                yield from self._idle()
        self.state = STOPPED
        self.stopped_at_s = self.env.now
        if self.on_stopped is not None:
            self.on_stopped(self)

    def step(self):
        """One engine step in simulated time, as `LLMEngine.step`: schedule, time (the cost model's
        step time passes on the SimPy clock), update. A run of pure decode steps proven identical by
        the scheduler is advanced at once (`_stretch`). Returns False, without waiting, when the
        scheduler has nothing to run."""
        out = self.scheduler.schedule(now=self.env.now)
        if out.is_empty:
            return False
        num_steps = self.scheduler.decode_stretch(out, self.max_stretch_steps)
        if num_steps > 1:
            yield from self._stretch(out, num_steps)
            return True
        shape = out.shape
        step_s = self.cost_model.step_time(shape) + self._wake_up()
        if out.host_loaded_blocks:  # KV brought back from host memory before the step
            step_s += (
                out.host_loaded_blocks * self.scheduler.block_manager.host_tier.load_s_per_block
            )
        yield self.env.timeout(step_s)
        self.scheduler.update(out, [SIM_TOKEN_ID] * len(out.scheduled), now=self.env.now)
        self._after_steps(1, step_s, shape)
        return True

    def _idle(self):
        self._wake = self.env.event()
        yield self._wake
        self._wake = None
        self._woke = True

    def _wake_up(self) -> float:
        """The wake-up cost once after idleness (threads asleep, caches cold), else 0."""
        if not self._woke:
            return 0.0
        self._woke = False
        return self.wake_s

    def _stretch(self, out: SchedulerOutput, num_steps: int):
        """Up to `num_steps` decode steps at once, cut before the next observation and, when a request
        arrives or is aborted meanwhile, after the step in progress. A cut by arrivals the stretch's
        `schedule()` calls would not examine (`Scheduler.decode_stretch_ignores_arrivals`) is made
        without the passes over the batch: what the engine's step after it would do is known (the
        same stretch, re-timed from there: `_ride_out`), so only its accounts are kept."""
        scheduler = self.scheduler
        start = self.env.now
        start_utilization: float | None = scheduler.kv_utilization()
        step_times = self.cost_model.decode_stretch_times(out.shape, num_steps)
        step_times[0] += self._wake_up()
        self._changed = False
        done, all_ends = 0, []  # steps of `out` already accounted for, and their end times
        while True:
            if num_steps - done == 1:  # after a cut, one step left: the engine's plain `step()`
                step_s = self.cost_model.step_time(DecodeCounts(out.shape, done)) + self._wake_up()
                yield self.env.timeout(step_s)
                all_ends.append(self.env.now)
                self._end_stretch(out, done, all_ends, step_s, None)
                return
            ends: list[float] = []
            elapsed = 0.0
            horizon = self.next_observation_s(start)
            for step_s in step_times:
                if ends and start + elapsed + step_s > horizon:
                    break
                elapsed += step_s
                ends.append(start + elapsed)
            self._wake = self.env.event()
            yield self.env.timeout(elapsed) | self._wake
            self._wake = None
            now = self.env.now
            if now >= ends[-1]:
                break
            # interrupted: finish the step in progress
            ends = ends[: next(i for i, end in enumerate(ends) if end >= now) + 1]
            if ends[-1] > now:
                yield self.env.timeout(ends[-1] - now)
            if not self._ride_out(out, num_steps, done + len(ends)):
                break
            # the engine's next step would go on with `out`'s stretch, `done` steps on: account for
            # the steps so far as `_after_steps` would, then time the rest as `step()` would from here
            done += len(ends)
            all_ends += ends
            end_utilization, used_blocks, next_utilization = scheduler.decode_stretch_kv(out, done)
            self._account(
                len(ends), ends[-1] - start, start_utilization, end_utilization, used_blocks
            )
            if num_steps - done >= 2:
                start, start_utilization = self.env.now, next_utilization
                step_times = self.cost_model.decode_stretch_times(
                    DecodeCounts(out.shape, done), num_steps - done
                )
                step_times[0] += self._wake_up()
        all_ends += ends
        self._end_stretch(out, done, all_ends, ends[-1] - start, start_utilization)

    def _end_stretch(
        self,
        out: SchedulerOutput,
        done: int,
        step_ends: list[float],
        busy_s: float,
        start_utilization: float | None,
    ) -> None:
        """Advance the scheduler over all of the stretch's steps (`step_ends`), the last `len(step_ends)
        - done` of them, taking `busy_s`, not yet accounted for."""
        num_steps = len(step_ends)
        self.scheduler.advance_decodes(out, num_steps, step_ends, SIM_TOKEN_ID)
        if self.step_shapes is not None:
            self.step_shapes.extend(_decode_shapes(out.shape, num_steps))
        self._after_steps(num_steps - done, busy_s, None, start_utilization)

    def _ride_out(self, out: SchedulerOutput, num_steps: int, done: int) -> bool:
        """Whether the engine, cut after `done` of the `num_steps` steps of `out`'s stretch by arrivals
        alone, would go on with the remaining ones: nothing but `add_request` poked it, the arrivals go
        unexamined, a step remains, and the stretch ended at an event, not at `max_stretch_steps`
        (from the cut it could go further)."""
        return (
            self.rides_out_arrivals
            and not self._changed
            and num_steps - done >= 1
            and num_steps < self.max_stretch_steps
            and self.scheduler.decode_stretch_ignores_arrivals(out)
        )

    def _after_steps(
        self,
        num_steps: int,
        busy_s: float,
        shape,
        start_utilization: float | None = None,
    ) -> None:
        """After the scheduler's `update` / `advance_decodes`: `start_utilization`: a stretch's KV
        utilisation before its first step; its steps are weighed by the mean of that and the end state
        (one step: the end state, as the live engine measures)."""
        if shape is not None and self.step_shapes is not None:
            self.step_shapes.append(shape)
        scheduler = self.scheduler
        self._account(
            num_steps,
            busy_s,
            start_utilization,
            scheduler.kv_utilization(),
            scheduler.block_manager.num_used_blocks,
        )
        now = self.env.now
        for request in scheduler.news:  # a first token or a finish is news to the client
            if request.first_token_time == now or request.finish_time is not None:  # set on finish
                self.on_progress(request)

    def _account(
        self,
        num_steps: int,
        busy_s: float,
        start_utilization: float | None,
        end_utilization: float,
        used_blocks: int,
    ) -> None:
        """The counters and the snapshot observers read, after steps ending now."""
        self.num_steps += num_steps
        self.busy_s += busy_s
        mean = (
            end_utilization
            if start_utilization is None
            else (start_utilization + end_utilization) / 2
        )
        self.kv_utilization_busy_s += mean * busy_s
        self.snapshot = (len(self.scheduler.waiting), len(self.scheduler.running), used_blocks)
        self._load_changed()


def _decode_shapes(first, num_steps: int) -> list:
    """The shapes of a decode stretch: every context one token longer each step."""
    from engine.core.step_shape import StepShape

    return [
        StepShape((), tuple(length + k for length in first.decode_context_lens))
        for k in range(num_steps)
    ]
