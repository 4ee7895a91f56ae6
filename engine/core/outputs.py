"""What the engine hands back per request: tokens so far, finish reason, timings."""

from dataclasses import dataclass

from engine.core.request import Request


@dataclass(frozen=True)
class RequestMetrics:
    arrival_time: float
    first_scheduled_time: float | None
    first_token_time: float | None
    finish_time: float | None

    @property
    def queue_time(self) -> float | None:
        return (
            None
            if self.first_scheduled_time is None
            else self.first_scheduled_time - self.arrival_time
        )

    @property
    def ttft(self) -> float | None:
        return None if self.first_token_time is None else self.first_token_time - self.arrival_time

    @property
    def e2e_latency(self) -> float | None:
        return None if self.finish_time is None else self.finish_time - self.arrival_time


@dataclass(frozen=True)
class RequestOutput:
    request_id: str
    prompt_token_ids: list[int]
    output_token_ids: list[int]
    text: str
    finished: bool
    finish_reason: str | None
    metrics: RequestMetrics
    num_preemptions: int
    num_cached_tokens: int

    @classmethod
    def of(cls, req: Request, text: str = "") -> "RequestOutput":
        metrics = RequestMetrics(
            req.arrival_time, req.first_scheduled_time, req.first_token_time, req.finish_time
        )
        # the prompt never changes after admission: share it rather than copy it every step
        return cls(
            req.request_id,
            req.prompt_token_ids,
            list(req.output_token_ids),
            text,
            req.is_finished,
            req.finish_reason,
            metrics,
            req.num_preemptions,
            req.num_cached_tokens,
        )
