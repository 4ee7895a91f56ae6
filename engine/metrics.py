"""Prometheus metrics under vLLM's names (so existing Grafana boards work), plus surgeplan's own
KV-cache gauges. Updated from the engine thread after every step; prometheus_client is thread-safe.
The families themselves (names, buckets, labels, the registry) are `engine/metric_families.py`."""

import time
from collections import deque

from prometheus_client import (
    CONTENT_TYPE_LATEST,  # noqa: F401  (re-exported for the server)
    Gauge,
    generate_latest,
)

from engine.core.outputs import RequestOutput
from engine.metric_families import ALLOCATION_RATE_WINDOW_S, MetricFamilies


class ServingMetrics(MetricFamilies):
    """The families of `MetricFamilies`, fed from the engine thread after every step and from the
    event loop as requests are refused, aborted and answered."""

    def __init__(self, model_name: str):
        self._last_token_time: dict[str, float] = {}
        self._allocation_samples: deque[tuple[float, int]] = deque()
        self._seen_preemptions = 0
        self._seen_allocations = 0
        self._seen_prefix = (0, 0)
        self._tenant_published: dict[
            str, int
        ] = {}  # what surgeplan:tenant_kv_blocks shows per tenant
        self._tenants_kept: set[str] = set()
        super().__init__(model_name)
        self.keep_tenants(["default"])

    # ---- engine thread ---------------------------------------------------------------------------
    def observe_outputs(self, outputs: list[RequestOutput], now: float) -> None:
        """Each output is one new token of its request, produced at `now` (the end of the step)."""
        self.generation_tokens.inc(len(outputs))
        for out in outputs:
            last = self._last_token_time.get(out.request_id)
            if last is None:
                self.prompt_tokens.inc(len(out.prompt_token_ids))
                self._observe_if_known(self.ttft, out.metrics.ttft)
                self._observe_if_known(self.queue_time, out.metrics.queue_time)
            else:
                self.itl.observe(now - last)
            self._last_token_time[out.request_id] = now
            if out.finished:
                self._observe_finished(out)

    def _observe_finished(self, out: RequestOutput) -> None:
        self._last_token_time.pop(out.request_id, None)
        self.success.labels(self._model, out.finish_reason or "abort").inc()
        self._observe_if_known(self.e2e, out.metrics.e2e_latency)

    @staticmethod
    def _observe_if_known(histogram, value: float | None) -> None:
        if value is not None:
            histogram.observe(value)

    def observe_accepted(self) -> None:
        self.accepted.inc()

    def observe_aborted(
        self,
        request_id: str,
        finished_reason: str = "abort",
        rejected_reason: str | None = None,
        aborted_reason: str = "disconnect",
    ) -> None:
        """A request ended outside a step: by its client, a deadline, a drain, a failed step, or a stop
        string (finished_reason "stop", not an abort)."""
        self._last_token_time.pop(request_id, None)
        self.success.labels(self._model, finished_reason).inc()
        if finished_reason == "abort":
            self.aborted.labels(self._model, aborted_reason).inc()
        if rejected_reason is not None:
            self.rejected.labels(self._model, rejected_reason).inc()

    def observe_cache_config(self, cache_config) -> None:
        """vLLM's `vllm:cache_config_info`: the KV pool's settings as labels of a gauge set to 1."""
        Gauge(
            "vllm:cache_config_info",
            "KV cache settings (labels; value 1).",
            ("model_name", "block_size", "cache_dtype", "num_gpu_blocks"),
            registry=self.registry,
        ).labels(
            self._model,
            str(cache_config.block_size),
            cache_config.kv_cache_dtype,
            str(cache_config.num_kv_blocks),
        ).set(1)

    def observe_engine(self, engine, now: float | None = None) -> None:
        """Gauges and counters read from the engine's scheduler and block manager."""
        now = time.perf_counter() if now is None else now
        scheduler, blocks = engine.scheduler, engine.scheduler.block_manager
        kv = engine.kv_stats()
        self.running.set(len(scheduler.running))
        self.waiting.set(len(scheduler.waiting))
        self.kv_usage.set(kv.usage)
        self.fragmented_slots.set(kv.fragmented_slots)
        self.slot_utilization.set(kv.utilization)
        self.preemptions.inc(scheduler.num_preemptions - self._seen_preemptions)
        self._seen_preemptions = scheduler.num_preemptions
        self.allocations.inc(blocks.num_allocations - self._seen_allocations)
        self._seen_allocations = blocks.num_allocations
        self.allocation_rate.set(self._allocation_rate(now, blocks.num_allocations))
        self._observe_prefix_cache(blocks.num_prefix_queries, blocks.num_prefix_hits)
        queries, host = blocks.num_prefix_queries, blocks.host_tier
        host_hits = host.hit_tokens if host is not None else 0
        self.tier_hit_rate.labels(self._model, "gpu").set(
            (blocks.num_prefix_hits - host_hits) / queries if queries else 0.0
        )
        self.tier_hit_rate.labels(self._model, "cpu").set(host_hits / queries if queries else 0.0)
        self._observe_tenants(blocks.tenant_blocks)

    def _allocation_rate(self, now: float, num_allocations: int) -> float:
        samples = self._allocation_samples
        samples.append((now, num_allocations))
        while len(samples) > 2 and now - samples[1][0] >= ALLOCATION_RATE_WINDOW_S:
            samples.popleft()
        (t0, a0), (t1, a1) = samples[0], samples[-1]
        return (a1 - a0) / (t1 - t0) if t1 > t0 else 0.0

    def _observe_prefix_cache(self, queries: int, hits: int) -> None:
        seen_queries, seen_hits = self._seen_prefix
        self.prefix_queries.inc(queries - seen_queries)
        self.prefix_hits.inc(hits - seen_hits)
        self._seen_prefix = (queries, hits)
        self.prefix_hit_rate.set(hits / queries if queries else 0.0)

    def _observe_tenants(self, tenant_blocks) -> None:
        """Sets only the tenants whose count changed; a tenant that holds no block any more loses its
        series (the block manager keeps no zero entries), so the label set is the tenants holding KV,
        not every name ever seen."""
        published = self._tenant_published
        for tenant, blocks in tenant_blocks.items():
            if published.get(tenant) != blocks:
                published[tenant] = blocks
                self.tenant_blocks.labels(self._model, tenant).set(blocks)
        for tenant in [t for t in published if t not in tenant_blocks and published[t]]:
            if tenant in self._tenants_kept:
                published[tenant] = 0
                self.tenant_blocks.labels(self._model, tenant).set(0)
            else:
                del published[tenant]
                self.tenant_blocks.remove(self._model, tenant)

    def keep_tenants(self, tenants) -> None:
        """Tenants whose KV series stays (at 0 when idle): the default and the configured ones."""
        self._tenants_kept |= set(tenants)
        for tenant in tenants:
            if tenant not in self._tenant_published:
                self._tenant_published[tenant] = 0
                self.tenant_blocks.labels(self._model, tenant).set(0)

    # ---- event loop ------------------------------------------------------------------------------
    def observe_rejected(self, reason: str) -> None:
        self.rejected.labels(self._model, reason).inc()

    def observe_tenant_rejected(self, tenant: str, limit: str) -> None:
        self.tenant_rejected.labels(self._model, tenant, limit).inc()

    def observe_response(self, route: str, status: int) -> None:
        self.responses.labels(self._model, route, str(status)).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
