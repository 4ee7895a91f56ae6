"""What one connection may cost the server, enforced in the HTTP parser (uvicorn's h11 protocol),
where no ASGI middleware can reach, since the app only sees a request once its head has been
parsed:

- the request head: h11 buffers at most `max_header_bytes` + HEADER_SLACK_BYTES of an incomplete
  head (the request line, names, values and separators); more is answered 431 and the connection
  closed, so memory per connection stays bounded (the app's AccessMiddleware then checks names
  and values precisely against `max_header_bytes`);
- the head's deadline: a connection that has not sent a whole request head `header_timeout_s`
  after it opened, or after its previous response, is answered 408 and closed (slowloris);
- open connections: one over `max_connections` is answered 503 and closed at once, before it is
  read.

The body's deadline is BodyCheckMiddleware's, which reads the body. Refusals leave as OpenAI's
error JSON and are counted in surgeplan:requests_rejected and surgeplan:http_responses (route
"other")."""

import asyncio
import json
from dataclasses import dataclass

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from engine.metrics import ServingMetrics
from engine.openai import protocol as api
from engine.openai.server_config import ServerConfig

HEADER_SLACK_BYTES = 8 << 10
_REASONS = {
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    503: "Service Unavailable",
}


@dataclass(frozen=True)
class ConnectionLimits:
    max_head_bytes: int
    header_timeout_s: float
    max_connections: int
    metrics: ServingMetrics

    @classmethod
    def of(cls, config: ServerConfig, metrics: ServingMetrics) -> "ConnectionLimits":
        return cls(
            config.max_header_bytes + HEADER_SLACK_BYTES,
            config.header_timeout_s,
            config.max_connections,
            metrics,
        )


def uvicorn_options(app) -> dict:
    """uvicorn.Config's keyword arguments that put `build_app`'s connection limits in force."""
    limits: ConnectionLimits = app.state.connection_limits
    protocol = type("GuardedH11Protocol", (GuardedH11Protocol,), {"limits": limits})
    # h11's own bound stays above ours, so ours answers first (with OpenAI's JSON): a backstop
    return {"http": protocol, "h11_max_incomplete_event_size": 2 * limits.max_head_bytes}


class GuardedH11Protocol(H11Protocol):
    limits: ConnectionLimits  # set on the subclass `uvicorn_options` makes

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            self._refuse(
                503,
                "too_many_connections",
                f"the server has {len(self.connections) - 1} open "
                f"connections, its limit (--max-connections {self.limits.max_connections}); "
                "retry later",
            )
            return
        self._arm_head_timer()

    def data_received(self, data: bytes) -> None:
        if (
            self.conn.their_state is h11.IDLE
            and not self.transport.is_closing()
            and self._head_too_long(data)
        ):
            self._refuse(
                431,
                "header_too_large",
                f"the request head is over {self.limits.max_head_bytes} "
                "bytes (--max-header-bytes plus the request line); expected smaller headers",
            )
            return
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm_head_timer()

    def _head_too_long(self, data: bytes) -> bool:
        """Whether the head being received (what h11 holds, then `data`: the head may end inside
        it, a body following) runs past the limit. Looks at no more than the limit and a chunk."""
        held = self.conn.trailing_data[0]
        limit = self.limits.max_head_bytes
        if len(held) + len(data) <= limit:
            return False
        tail = held[-3:]  # the blank line may start at the end of what is held
        end = (tail + data[: limit + 1]).find(b"\r\n\r\n")
        return end < 0 or len(held) - len(tail) + end + 4 > limit

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm_head_timer()  # the next request's head has its own deadline

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        super().connection_lost(exc)

    # ---- the head's deadline ---------------------------------------------------------------------
    def _arm_head_timer(self) -> None:
        self._disarm_head_timer()
        self._head_timer = self.loop.call_later(self.limits.header_timeout_s, self._head_timed_out)

    def _disarm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if not self.conn.trailing_data[0]:  # an idle keep-alive connection: just close it
            self.transport.close()
            return
        self._refuse(
            408,
            "header_timeout",
            f"the request head did not arrive within "
            f"{self.limits.header_timeout_s:g} s (--header-timeout); expected a whole request "
            "sooner",
        )

    def _refuse(self, status: int, reason: str, message: str) -> None:
        """Answers with OpenAI's error JSON and closes (no request parsed: h11 cannot answer)."""
        self._disarm_head_timer()
        body = json.dumps(api.error_body(status, message)).encode()
        head = (
            f"HTTP/1.1 {status} {_REASONS[status]}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        ).encode()
        self.transport.write(head + body)
        self.transport.close()
        self.limits.metrics.observe_rejected(reason)
        self.limits.metrics.observe_response("other", status)
