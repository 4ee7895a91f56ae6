"""The Prometheus metric families a server exports: vLLM's names, buckets and labels (so existing
Grafana boards work) plus surgeplan's own KV-cache and admission series, in a registry of their own
so several servers can live in one process (tests). Only the definitions: what feeds them from the
engine and the event loop is `ServingMetrics` in `engine/metrics.py`."""

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics

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


class MetricFamilies:
    """Every family of the registry, created (with zero series for the known reasons) at init."""

    def __init__(self, model_name: str):
        disable_created_metrics()  # like vLLM: no `_created` series beside every counter
        self.registry = CollectorRegistry()
        self._model = model_name
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
