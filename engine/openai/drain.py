"""Graceful drain: on SIGTERM or Ctrl-C the server stops admitting (503 + Retry-After, /health 503),
lets the requests in flight finish for up to `drain_timeout_s`, aborts the rest (each answered with a
503 saying why, counted as aborted for "drain"), then shuts down and exits with status 0. A second
signal skips the wait; a third forces uvicorn out at once. A signal that comes while the server tears
down (the engine thread joined, the event loop closed) changes nothing: the exit status stays 0.

`DrainingServer` is uvicorn's server with that signal handling (uvicorn's own would stop admitting by
closing the port, cut waiting streams after its timeout, restore the default handlers before the
teardown, so that a repeated SIGTERM there kills the process with 143, and re-raise the signal on the
way out). `make_server` builds it with the connection limits of http_guard.py.
"""

import asyncio
import contextlib
import logging
import signal
import sys
import threading
from collections.abc import Callable

import uvicorn
from uvicorn.server import HANDLED_SIGNALS

from engine.async_engine import AsyncEngine
from engine.openai.http_guard import uvicorn_options
from engine.openai.limits import Admission
from engine.request_stream import EngineStopped

log = logging.getLogger("surgeplan.server")
FLUSH_TIMEOUT_S = 10.0  # after the aborts: time for the 503s to reach their clients


class Drainer:
    def __init__(self, admission: Admission, engine: AsyncEngine, drain_timeout_s: float):
        self.admission, self.engine, self.drain_timeout_s = admission, engine, drain_timeout_s
        self.on_done: Callable[[], None] | None = None  # called on the event loop once drained
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self._hurry = asyncio.Event()

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """The event loop the server runs on (set at startup)."""
        self._loop = loop

    @property
    def started(self) -> bool:
        return self._task is not None

    def request(self) -> bool:
        """From any thread or a signal handler: starts the drain, or hurries one under way. False when
        the server has not started, so there is nothing to drain."""
        if self._loop is None or self._loop.is_closed():
            return False
        self._loop.call_soon_threadsafe(self.begin)
        return True

    def begin(self) -> None:
        """On the event loop: stop admitting and drain in the background (a second call skips the wait)."""
        if self._task is not None:
            log.warning("second stop signal: aborting the requests in flight now")
            self._hurry.set()
            return
        self.admission.start_draining()
        self._task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        log.info(
            "draining: %d requests in flight, waiting up to %g s for them (send the signal again to "
            "abort them now)",
            self.admission.in_flight,
            self.drain_timeout_s,
        )
        if not await self._idle_within(self.drain_timeout_s):
            log.warning("drain: aborting the %d requests still in flight", self.admission.in_flight)
            self.engine.abort_all(
                EngineStopped(
                    f"the server is shutting down: this request was aborted after the drain timeout of "
                    f"{self.drain_timeout_s:g} s (finish_reason abort); retry it on another replica"
                ),
                reason="drain",
            )
            await self.admission.wait_idle(FLUSH_TIMEOUT_S)
        log.info("drained; shutting down")
        if self.on_done is not None:
            self.on_done()

    async def _idle_within(self, timeout_s: float) -> bool:
        idle = asyncio.ensure_future(self.admission.wait_idle(timeout_s))
        hurry = asyncio.ensure_future(self._hurry.wait())
        await asyncio.wait({idle, hurry}, return_when=asyncio.FIRST_COMPLETED)
        hurry.cancel()
        if not idle.done():
            idle.cancel()
            return False
        return idle.result()


class DrainingServer(uvicorn.Server):
    """uvicorn's server whose SIGTERM / SIGINT start a drain instead of an immediate stop."""

    def __init__(self, config: uvicorn.Config, drainer: Drainer):
        super().__init__(config)
        self.drainer = drainer
        drainer.on_done = self._drained
        self._signals = 0

    def handle_exit(
        self, sig, frame
    ) -> None:  # not recorded in _captured_signals: no re-raise, exit 0
        if self.should_exit and self.started:
            return  # drained and tearing down already: a repeated signal changes nothing
        self._signals += 1
        if self._signals >= 3 or not self.drainer.request():
            self.should_exit = True
            self.force_exit = self._signals >= 3

    async def shutdown(self, sockets=None) -> None:
        await super().shutdown(sockets)
        if (
            self.force_exit
        ):  # uvicorn then skips the app's shutdown; ours only joins the engine thread
            await self.lifespan.shutdown()

    @contextlib.contextmanager
    def capture_signals(self):
        """Our handler from the start of serving to the end of the process: never the default one back."""
        if threading.current_thread() is threading.main_thread():
            for sig in HANDLED_SIGNALS:
                signal.signal(sig, self.handle_exit)
        yield

    def _drained(self) -> None:
        self.should_exit = True


def make_server(app, **config: object) -> DrainingServer:
    """A DrainingServer for a `build_app` app; `config`: uvicorn.Config's other arguments."""
    return DrainingServer(
        uvicorn.Config(app, timeout_graceful_shutdown=5, **uvicorn_options(app), **config),
        app.state.drainer,
    )


def serve_forever(app, host: str, port: int, log_level: str = "info") -> None:
    """Runs the app until a signal has drained it; exits 1 when the server could not start."""
    server = make_server(app, host=host, port=port, log_level=log_level)
    server.run()
    # the interpreter's teardown puts the default handlers back (a signal then kills with 143); an
    # ignored signal stays ignored, and there is nothing left to drain
    if threading.current_thread() is threading.main_thread():
        for sig in HANDLED_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
    if not server.started:
        sys.exit(1)
