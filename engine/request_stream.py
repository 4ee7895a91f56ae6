"""What the event loop holds of a request served by `AsyncEngine`: its `RequestStream` of outputs,
the errors that end or refuse a request (queue full, deadline, failed step, shutdown), and the two
callbacks the engine thread schedules on the loop (`settle`, `deliver`). Apart from
`async_engine.py` (the engine thread and its inbox) because the server's handlers read these
without touching the thread."""

import asyncio

from engine.core.outputs import RequestOutput


class QueueFull(Exception):
    """The waiting queue is at its limit: the client should retry later."""


class DeadlineExceeded(Exception):
    """The request's deadline passed before it finished; it was aborted."""


class EngineStepError(Exception):
    """An engine step raised; the requests in flight were aborted, the engine serves on."""


class EngineStopped(Exception):
    """The server is shutting down."""


class RequestStream:
    """One request's outputs, read on the event loop. Each output holds all tokens so far, so a
    reader that fell behind may skip to the newest (`next_output` does)."""

    def __init__(self, request_id: str):
        self.request_id = request_id
        self.queue: asyncio.Queue = asyncio.Queue()
        self.finished = False

    def put(self, item: RequestOutput | Exception) -> None:
        self.queue.put_nowait(item)

    async def next_output(self) -> RequestOutput:
        """The newest output (waiting for one if none is queued); raises the error that ended the request."""
        item = await self.queue.get()
        while not self.queue.empty() and not isinstance(item, Exception) and not item.finished:
            item = self.queue.get_nowait()
        if isinstance(item, Exception):
            self.finished = True
            raise item
        self.finished = item.finished
        return item


def settle(future: asyncio.Future, error: Exception | None) -> None:
    """On the loop: the engine took a request (`error` None) or refused it."""
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)


def deliver(deliveries: list[tuple[RequestStream, RequestOutput]]) -> None:
    """On the loop: one step's outputs, each to its request's stream."""
    for stream, out in deliveries:
        stream.put(out)
