"""Prometheus metrics under vLLM's names (so existing Grafana boards work), plus surgeplan's own
KV-cache gauges. Updated from the engine thread after every step; prometheus_client is thread-safe,
and each server gets its own registry so several can live in one process (tests)."""

import time
from collections import deque

from prometheus_client import (
    CONTENT_TYPE_LATEST,  # noqa: F401  (re-exported for the server)
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

from engine.core.outputs import RequestOutput

# vLLM's bucket boundaries, so dashboards' heatmaps line up
TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
LATENCY_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
ALLOCATION_RATE_WINDOW_S = 10.0
# refused before the engine took them (queue_full ... draining), or ended by the server (deadline)
REJECTED_REASONS = (
    "queue_full",
    "deadline",
    "unauthorized",
    "forbidden",
    "header_too_large",
    "rate_limited",
    "draining",
    "header_timeout",
    "body_timeout",
    "too_many_connections",
)
ABORTED_REASONS = ("disconnect", "deadline", "drain", "step_error", "shutdown")


class ServingMetrics:
    def __init__(self, model_name: str):
        disable_created_metrics()  # like vLLM: no `_created` series beside every counter
        self.registry = CollectorRegistry()
        self._model = model_name
        self._last_token_time: dict[str, float] = {}
        self._allocation_samples: deque[tuple[float, int]] = deque()
        self._seen_preemptions = 0
        self._seen_allocations = 0
        self._seen_prefix = (0, 0)
        self._tenant_published: dict[
            str, int
        ] = {}  # what surgeplan:tenant_kv_blocks shows per tenant
        self._tenants_kept: set[str] = set()
        self._define_vllm_metrics()
        self._define_surgeplan_metrics()

    def _labelled(self, kind, name: str, doc: str, extra: tuple[str, ...] = (), **kwargs):
        metric = kind(name, doc, ("model_name",) + extra, registry=self.registry, **kwargs)
        return metric if extra else metric.labels(self._model)

    def _define_vllm_metrics(self) -> None:
        self.running = self._labelled(
            Gauge, "vllm:num_requests_running", "Requests in the running batch."
        )
        self.waiting = self._labelled(
            Gauge, "vllm:num_requests_waiting", "Requests waiting to be scheduled."
        )
        self.kv_usage = self._labelled(
            Gauge, "vllm:kv_cache_usage_perc", "KV-cache usage: 1 means 100 percent."
        )
        self.preemptions = self._labelled(
            Counter, "vllm:num_preemptions", "Cumulative preemptions."
        )
        self.prompt_tokens = self._labelled(
            Counter, "vllm:prompt_tokens", "Prefilled prompt tokens."
        )
        self.generation_tokens = self._labelled(
            Counter, "vllm:generation_tokens", "Generated tokens."
        )
        self.success = self._labelled(
            Counter,
            "vllm:request_success",
            "Finished requests by finish reason.",
            ("finished_reason",),
        )
        self.prefix_queries = self._labelled(
            Counter, "vllm:prefix_cache_queries", "Prompt tokens looked up."
        )
        self.prefix_hits = self._labelled(
            Counter, "vllm:prefix_cache_hits", "Prompt tokens found in the prefix cache."
        )
        self.ttft = self._labelled(
            Histogram,
            "vllm:time_to_first_token_seconds",
            "Time to first token.",
            buckets=TTFT_BUCKETS,
        )
        self.itl = self._labelled(
            Histogram,
            "vllm:inter_token_latency_seconds",
            "Time between output tokens.",
            buckets=ITL_BUCKETS,
        )
        self.e2e = self._labelled(
            Histogram,
            "vllm:e2e_request_latency_seconds",
            "Arrival to last token.",
            buckets=LATENCY_BUCKETS,
        )
        self.queue_time = self._labelled(
            Histogram,
            "vllm:request_queue_time_seconds",
            "Arrival to first scheduled.",
            buckets=LATENCY_BUCKETS,
        )

    def _define_surgeplan_metrics(self) -> None:
        self.allocations = self._labelled(
            Counter, "surgeplan:kv_block_allocations", "Fresh KV blocks handed out."
        )
        self.allocation_rate = self._labelled(
            Gauge,
            "surgeplan:kv_block_allocations_per_second",
            f"Fresh KV blocks per second over the last {ALLOCATION_RATE_WINDOW_S:g} s.",
        )
        self.prefix_hit_rate = self._labelled(
            Gauge,
            "surgeplan:prefix_cache_hit_rate",
            "Prompt tokens served from the prefix cache / looked up, since start.",
        )
        self.tier_hit_rate = self._labelled(
            Gauge,
            "surgeplan:kv_tier_hit_rate",
            "Prompt tokens served from "
            "each KV tier (gpu: the prefix cache, cpu: loaded back from host "
            "memory) / looked up, since start.",
            ("tier",),
        )
        self.fragmented_slots = self._labelled(
            Gauge,
            "surgeplan:kv_fragmented_slots",
            "Token slots reserved in used blocks but holding no KV.",
        )
        self.slot_utilization = self._labelled(
            Gauge, "surgeplan:kv_slot_utilization", "Token slots holding KV / slots in used blocks."
        )
        self.tenant_blocks = self._labelled(
            Gauge, "surgeplan:tenant_kv_blocks", "KV blocks held per tenant.", ("tenant",)
        )
        self.rejected = self._labelled(
            Counter,
            "surgeplan:requests_rejected",
            "Requests refused or ended by the server, by reason.",
            ("reason",),
        )
        self.step_errors = self._labelled(
            Counter, "surgeplan:engine_step_errors", "Engine steps that raised."
        )
        self._define_admission_metrics()
        self.keep_tenants(["default"])
        for reason in ("stop", "length", "abort"):  # zeros from the start, so rates work at once
            self.success.labels(self._model, reason)
        for reason in REJECTED_REASONS:
            self.rejected.labels(self._model, reason)
        for reason in ABORTED_REASONS:
            self.aborted.labels(self._model, reason)

    def _define_admission_metrics(self) -> None:
        """What lets every request be accounted for: accepted = finished by reason (vllm:request_success),
        and an aborted one's reason; HTTP answers by route and status; 429s per tenant and limit."""
        self.accepted = self._labelled(
            Counter,
            "surgeplan:requests_accepted",
            "Requests the engine accepted; each ends in vllm:request_success.",
        )
        self.aborted = self._labelled(
            Counter,
            "surgeplan:requests_aborted",
            "Accepted requests ended before "
            "their end, by reason (counted in vllm:request_success as abort).",
            ("reason",),
        )
        self.responses = self._labelled(
            Counter,
            "surgeplan:http_responses",
            "HTTP responses by route and status.",
            ("route", "status"),
        )
        self.tenant_rejected = self._labelled(
            Counter,
            "surgeplan:tenant_requests_rejected",
            "Requests refused with 429, by tenant and limit.",
            ("tenant", "limit"),
        )
        self.in_flight = self._labelled(
            Gauge,
            "surgeplan:requests_in_flight",
            "Generation requests admitted and not yet answered in full.",
        )
        self.draining = self._labelled(
            Gauge, "surgeplan:draining", "1 while the server drains before exiting."
        )

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
