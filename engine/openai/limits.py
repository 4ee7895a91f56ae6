"""Admission in front of the engine: per-tenant rate limits (token buckets on requests/s and on prompt
tokens/s) and caps on requests in flight (429 + Retry-After, counted per tenant), refusal while the
server drains (503), and the server-wide count of requests in flight that a drain waits for.

Everything here runs on the event loop, so it needs no lock. A request holds a `Lease` from admission
until its whole answer has been sent; releasing it is idempotent, so every way out may release it.
A request that passes spends its tokens, whatever the engine then says of it (e.g. 400 over a quota).
"""

import asyncio
import math
import time

from engine.metrics import ServingMetrics
from engine.openai.protocol import APIError
from engine.openai.server_config import ServerConfig, Tenancy, TenantLimits


class TokenBucket:
    """`rate_per_s` tokens a second, holding at most `rate_per_s * burst_s`. A take larger than the bucket
    passes when the bucket is full and leaves it in debt, so the long-run rate still holds."""

    def __init__(self, rate_per_s: float, burst_s: float, now: float):
        self.rate_per_s, self.capacity = rate_per_s, rate_per_s * burst_s
        self.tokens, self.updated = self.capacity, now

    def wait_s(self, amount: float, now: float) -> float:
        """Seconds until `amount` can be taken (0: now)."""
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate_per_s)
        self.updated = now
        missing = min(amount, self.capacity) - self.tokens
        return max(0.0, missing / self.rate_per_s)

    def take(self, amount: float) -> None:
        self.tokens -= amount


class Lease:
    """A request's place in flight; `release` is idempotent."""

    def __init__(self, admission: "Admission", tenant: str):
        self._admission, self.tenant, self.released = admission, tenant, False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self._admission._release(self.tenant)


class Admission:
    def __init__(self, config: ServerConfig, tenancy: Tenancy, metrics: ServingMetrics):
        self.tenancy, self.metrics = tenancy, metrics
        self.retry_after_s, self.burst_s = config.retry_after_s, config.rate_limit_burst_s
        now = time.monotonic()
        self._buckets = {
            tenant: self._buckets_for(limits, now) for tenant, limits in tenancy.limits.items()
        }
        self._in_flight_by_tenant: dict[str, int] = {}
        self.in_flight = 0
        self.draining = False
        self.closing = (
            asyncio.Event()
        )  # set with `draining`: for those waiting on a client (a body)
        self._idle = asyncio.Event()
        self._idle.set()

    def _buckets_for(self, limits: TenantLimits, now: float) -> dict[str, TokenBucket]:
        rates = {
            "requests_per_s": limits.requests_per_s,
            "prompt_tokens_per_s": limits.prompt_tokens_per_s,
        }
        return {
            name: TokenBucket(rate, self.burst_s, now)
            for name, rate in rates.items()
            if rate is not None
        }

    def start_draining(self) -> None:
        self.draining = True
        self.closing.set()
        self.metrics.draining.set(1)

    def admit(self, tenant: str, num_prompt_tokens: int) -> Lease:
        """A lease for a new request, or APIError 503 (draining) / 429 (over a limit of the tenant)."""
        if self.draining:
            self.metrics.observe_rejected("draining")
            raise APIError(
                503,
                "the server is shutting down and admits no new requests; retry on another "
                "replica or after it restarts",
                headers={"Retry-After": str(self.retry_after_s)},
            )
        limits = self.tenancy.limits.get(tenant)
        if limits is not None:
            self._check(tenant, limits, num_prompt_tokens)
        self._in_flight_by_tenant[tenant] = self._in_flight_by_tenant.get(tenant, 0) + 1
        self.in_flight += 1
        self._idle.clear()
        self.metrics.in_flight.set(self.in_flight)
        return Lease(self, tenant)

    def _check(self, tenant: str, limits: TenantLimits, num_prompt_tokens: int) -> None:
        in_flight = self._in_flight_by_tenant.get(tenant, 0)
        if limits.max_concurrent is not None and in_flight >= limits.max_concurrent:
            self._refuse(
                tenant,
                "max_concurrent",
                self.retry_after_s,
                f"tenant {tenant!r} has {in_flight} requests in flight, its limit max_concurrent="
                f"{limits.max_concurrent}; retry when one has finished",
            )
        buckets, now = self._buckets[tenant], time.monotonic()
        amounts = {"requests_per_s": 1, "prompt_tokens_per_s": num_prompt_tokens}
        for name, bucket in buckets.items():
            wait_s = bucket.wait_s(amounts[name], now)
            if wait_s > 0:
                self._refuse(
                    tenant,
                    name,
                    math.ceil(wait_s),
                    f"tenant {tenant!r} is over its rate limit {name}={getattr(limits, name):g} "
                    f"(burst {self.burst_s:g} s) with {amounts[name]} more; retry in {wait_s:.2f} s",
                )
        for name, bucket in buckets.items():  # taken only once every bucket has room
            bucket.take(amounts[name])

    def _refuse(self, tenant: str, limit: str, retry_after_s: int, message: str) -> None:
        self.metrics.observe_rejected("rate_limited")
        self.metrics.observe_tenant_rejected(tenant, limit)
        raise APIError(429, message, headers={"Retry-After": str(max(1, retry_after_s))})

    def _release(self, tenant: str) -> None:
        left = self._in_flight_by_tenant[tenant] - 1
        if left:
            self._in_flight_by_tenant[tenant] = left
        else:
            del self._in_flight_by_tenant[tenant]  # no entry per tenant name ever seen
        self.in_flight -= 1
        self.metrics.in_flight.set(self.in_flight)
        if self.in_flight == 0:
            self._idle.set()

    async def wait_idle(self, timeout_s: float) -> bool:
        """Whether every lease was released within `timeout_s`."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        except TimeoutError:
            return False
        return True
