"""The synchronous `LLMEngine` driven by one dedicated thread beside the asyncio event loop.

The engine is not thread-safe, so only its thread touches it: the event loop posts commands (add,
abort) to an inbox, and the thread applies them between steps, steps, and hands each request's
outputs back to its `RequestStream` with one `call_soon_threadsafe` per step. Admission control (a
bounded waiting queue) and per-request deadlines are enforced here, next to the engine's queues.
A request's stream and the errors that end it are `engine/request_stream.py`.
"""

import asyncio
import heapq
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from engine.core.sampling_params import SamplingParams
from engine.llm_engine import LLMEngine
from engine.metrics import ServingMetrics
from engine.request_stream import (
    DeadlineExceeded,
    EngineStepError,
    EngineStopped,
    QueueFull,
    RequestStream,
    deliver,
    settle,
)
from engine.step_recorder import StepRecorder

log = logging.getLogger("surgeplan.engine")


@dataclass
class _Add:
    request_id: str
    prompt_token_ids: list[int]
    params: SamplingParams
    tenant: str
    arrival_time: float
    deadline: float | None  # time.perf_counter() clock
    stream: RequestStream
    accepted: asyncio.Future


class AsyncEngine:
    """Builds the engine in its own thread, then steps it there once `start` is called from the loop.

    Building it there matters on the CPU: OpenMP keeps one worker team per thread that runs parallel
    torch code, and two teams on few cores make libgomp stop spin-waiting, which slowed every step by
    ~20% when the model was built on the main thread and stepped on this one."""

    def __init__(
        self,
        build_engine: Callable[[], LLMEngine],
        metrics: ServingMetrics,
        max_waiting_requests: int | None = None,
        idle_poll_s: float = 0.5,
        recorder: StepRecorder | None = None,
    ):
        self.metrics = metrics
        self.recorder = recorder
        self.max_waiting_requests = max_waiting_requests
        self.idle_poll_s = idle_poll_s
        self._inbox: deque = deque()
        self._wake = threading.Event()
        self._lock = threading.Lock()  # guards the admission counts below
        self._num_pending = self._num_waiting = self._num_running = 0
        self._streams: dict[str, RequestStream] = {}  # engine thread only
        self._deadlines: list[tuple[float, str]] = []  # engine thread only: a heap
        self._stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = threading.Event()
        self.num_step_errors = 0
        self.engine = self._build_in_thread(build_engine)

    def _build_in_thread(self, build_engine: Callable[[], LLMEngine]) -> LLMEngine:
        built: dict = {}
        ready = threading.Event()

        def main() -> None:
            try:
                built["engine"] = build_engine()
            except BaseException as exc:  # noqa: BLE001  (handed to the caller, which raises it)
                built["error"] = exc
            ready.set()
            if "engine" in built:
                self._started.wait()
                if not self._stopping:
                    self._run()

        self._thread = threading.Thread(target=main, name="surgeplan-engine", daemon=True)
        self._thread.start()
        ready.wait()
        if "error" in built:
            raise built["error"]
        return built["engine"]

    # ---- lifecycle (event loop) --------------------------------------------------------------------
    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._started.set()

    async def stop(self) -> None:
        self._stopping = True
        self._started.set()
        self._wake.set()
        await asyncio.get_running_loop().run_in_executor(None, self._thread.join)

    @property
    def is_running(self) -> bool:
        return self._started.is_set() and self._thread.is_alive() and not self._stopping

    # ---- requests (event loop) ---------------------------------------------------------------------
    async def generate(
        self,
        request_id: str,
        prompt_token_ids: list[int],
        params: SamplingParams,
        tenant: str = "default",
        arrival_time: float | None = None,
        timeout_s: float | None = None,
    ) -> RequestStream:
        """Queues the request; returns its stream once the engine accepted it. Raises QueueFull,
        ValueError (the engine's validation message) or EngineStopped."""
        if not self.is_running:
            raise EngineStopped("the engine is not running")
        arrival_time = time.perf_counter() if arrival_time is None else arrival_time
        deadline = None if timeout_s is None else arrival_time + timeout_s
        stream = RequestStream(request_id)
        command = _Add(
            request_id,
            prompt_token_ids,
            params,
            tenant,
            arrival_time,
            deadline,
            stream,
            asyncio.get_running_loop().create_future(),
        )
        self._admit(command)
        try:
            await command.accepted
        except asyncio.CancelledError:
            self.abort(request_id)  # the client left before the engine took the request
            raise
        return stream

    def _admit(self, command: _Add) -> None:
        with self._lock:  # the same lock as `_refuse_pending`: no command is left behind
            if self._stopping:
                raise EngineStopped("the server is shutting down")
            if self.max_waiting_requests is not None:
                free_slots = max(0, self.engine.scheduler_config.max_num_seqs - self._num_running)
                queued = self._num_pending + self._num_waiting
                if queued >= self.max_waiting_requests + free_slots:
                    self.metrics.observe_rejected("queue_full")
                    raise QueueFull(
                        f"{queued} requests are already waiting (limit --max-waiting-requests="
                        f"{self.max_waiting_requests}); retry later"
                    )
            self._num_pending += 1
            self._inbox.append(command)
        self._wake.set()

    def abort(self, request_id: str, finished_reason: str = "abort") -> None:
        """Ends the request at the next step boundary and frees its KV blocks (thread-safe, idempotent):
        its client left. `finished_reason` "stop" is for a request the server ended itself (a stop string)."""
        self._inbox.append(("abort", request_id, finished_reason))
        self._wake.set()

    def abort_all(self, error: Exception, reason: str) -> None:
        """Ends every request in flight at the next step boundary, handing each stream `error`; counted
        as aborted for `reason` (thread-safe). Requests queued before this call are ended too."""
        self._inbox.append(("abort_all", error, reason))
        self._wake.set()

    @property
    def num_unfinished(self) -> int:
        with self._lock:
            return self._num_pending + self._num_waiting + self._num_running

    # ---- the engine thread -------------------------------------------------------------------------
    def _run(self) -> None:
        reason = "the server is shutting down"
        try:
            while not self._stopping:
                self._wake.clear()
                self._apply_commands()
                self._expire_deadlines()
                if self.engine.has_unfinished_requests():
                    self._step()
                else:
                    if self.recorder is not None:
                        self.recorder.idle()
                    self._wake.wait(self.idle_poll_s)
                self._publish_counts()
        except Exception as exc:  # noqa: BLE001  (a bug outside a step: end cleanly, /health turns 503)
            log.exception("the engine loop stopped")
            reason = f"the engine loop stopped: {exc!r}"
        finally:
            self._stopping = True
            self._fail_all(EngineStopped(reason), "shutdown")
            self._refuse_pending(EngineStopped(reason))

    def _apply_commands(self) -> None:
        while self._inbox:
            command = self._inbox.popleft()
            if isinstance(command, _Add):
                self._add(command)
            elif command[0] == "abort_all":
                self._fail_all(command[1], command[2])
            else:
                _, request_id, finished_reason = command
                self._abort(request_id, finished_reason=finished_reason)

    def _add(self, command: _Add) -> None:
        error = None
        try:
            self.engine.add_request(
                command.request_id,
                command.prompt_token_ids,
                command.params,
                arrival_time=command.arrival_time,
                tenant=command.tenant,
            )
        except Exception as exc:  # noqa: BLE001  (a ValueError is the client's; anything else is reported too)
            error = exc
        with self._lock:
            self._num_pending -= 1
            if error is None:
                self._num_waiting += 1
        if error is None:
            self.metrics.observe_accepted()
            self._streams[command.request_id] = command.stream
            if command.deadline is not None:
                heapq.heappush(self._deadlines, (command.deadline, command.request_id))
        self._loop.call_soon_threadsafe(settle, command.accepted, error)

    def _abort(
        self,
        request_id: str,
        error: Exception | None = None,
        rejected_reason: str | None = None,
        finished_reason: str = "abort",
        aborted_reason: str = "disconnect",
    ) -> None:
        stream = self._streams.pop(request_id, None)
        if self.engine.abort_request(request_id):
            self.metrics.observe_aborted(
                request_id, finished_reason, rejected_reason, aborted_reason
            )
        if stream is not None and error is not None:
            self._loop.call_soon_threadsafe(stream.put, error)

    def _expire_deadlines(self) -> None:
        now = time.perf_counter()
        while self._deadlines and self._deadlines[0][0] <= now:
            _, request_id = heapq.heappop(self._deadlines)
            if request_id in self._streams:
                self._abort(
                    request_id,
                    DeadlineExceeded(f"request {request_id} passed its deadline and was aborted"),
                    rejected_reason="deadline",
                    aborted_reason="deadline",
                )
        if (
            len(self._deadlines) > 2 * len(self._streams) + 64
        ):  # finished requests' deadlines: drop them
            self._deadlines = [entry for entry in self._deadlines if entry[1] in self._streams]
            heapq.heapify(self._deadlines)

    def _step(self) -> None:
        start = time.perf_counter()
        try:
            outputs = self.engine.step()
        except Exception as exc:  # noqa: BLE001  (one bad step must not take the server down)
            log.exception(
                "engine step failed; aborting the %d requests in flight", len(self._streams)
            )
            self.num_step_errors += 1
            self.metrics.step_errors.inc()
            self._fail_all(
                EngineStepError(f"the engine failed while running this request: {exc!r}"),
                "step_error",
            )
            return
        now = time.perf_counter()
        if (
            self.recorder is not None
            and self.engine.last_step is not None
            and not self.engine.last_step.shape.is_empty
        ):
            self.recorder.stepped(start, self.engine.last_step.total_s, self.engine.last_step.shape)
        deliveries = []
        for out in outputs:
            stream = self._streams.get(out.request_id)
            if out.finished:
                self._streams.pop(out.request_id, None)
            if stream is not None:
                deliveries.append((stream, out))
        if deliveries:
            self._loop.call_soon_threadsafe(deliver, deliveries)
        self.metrics.observe_outputs(outputs, now)

    def _fail_all(self, error: Exception, reason: str) -> None:
        # requests without a stream are not expected, but are ended (and counted) all the same
        for request_id in list(dict.fromkeys([*self._streams, *self.engine.requests])):
            self._abort(request_id, error, aborted_reason=reason)

    def _refuse_pending(self, error: Exception) -> None:
        with self._lock:
            pending, self._inbox = list(self._inbox), deque()
        for command in pending:
            if isinstance(command, _Add):
                self._loop.call_soon_threadsafe(settle, command.accepted, error)

    def _publish_counts(self) -> None:
        scheduler = self.engine.scheduler
        with self._lock:
            self._num_waiting, self._num_running = len(scheduler.waiting), len(scheduler.running)
        self.metrics.observe_engine(self.engine)
