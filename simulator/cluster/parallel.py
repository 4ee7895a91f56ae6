"""Replicas advanced in parallel between the router's scrapes of their state.

A real router reads each replica's load from scraped metrics, up to `router.staleness_s` old (llm-d's
endpoint picker refreshes them every 50 ms). Between two scrapes the replicas do not interact: the
router decides every request of the interval from the last scrape plus the requests it has sent
since, and each replica then runs the interval alone. So a run proceeds in intervals of the
staleness: the router here (the driver) routes the interval's arrivals and retries, shards of
replicas (`simulator.cluster.shards`: this process, worker processes or Ray actors) advance to the
interval's end on their own SimPy clocks and report what ended and each replica's load, which the
router reads at the next scrape. Intervals with nothing to route are merged into one advance. The
answer depends on the scenario (staleness included) and the seed only, never on how the replicas are
spread over shards or backends; staleness 0 is the exact sequential `Cluster`.

What stays sequential (`parallel_eligible`): one replica (nothing to route), autoscaled or
disaggregated fleets (their controllers act on live state), prefix-affinity routing (it reads every
replica's cache), and a retry back-off shorter than the staleness (a retry would land inside the
interval that sent it).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable

from simulator.cluster.cluster import Cluster, ClusterConfig
from simulator.cluster.collector import collector_paused
from simulator.cluster.shards import ReplicaSetup, ShardSpec, start_shards
from traces.replay import RequestRecord

STALE_POLICIES = ("round_robin", "least_outstanding", "least_kv", "power_of_two")


def parallel_eligible(scenario, config: ClusterConfig) -> bool:
    """Whether the scenario runs in parallel intervals (see the module docstring)."""
    staleness = scenario.cluster.router.staleness_s
    return (
        staleness > 0
        and config.initial_replicas > 1
        and not scenario.cluster.autoscaler.enabled
        and scenario.cluster.disaggregation is None
        and config.router_policy in STALE_POLICIES
        and config.max_concurrency is None  # the clients' cap is kept by `Cluster` alone
        and (config.max_retries == 0 or config.retry_backoff_s >= staleness)
    )


class StaleRouter:
    """The router's view: each replica's (outstanding, KV usage) at the last scrape, plus the requests
    sent to it since; the same choice rules as `Router` on that view, ties to the lower replica."""

    def __init__(self, policy: str, num_replicas: int, seed: int):
        self.policy, self.count = policy, num_replicas
        self._rng = random.Random(seed)
        self._next = 0
        self.scrape([(0, 0.0)] * num_replicas)

    def scrape(self, loads: list[tuple[int, float]]) -> None:
        self.outstanding = [load[0] for load in loads]
        self.kv_usage = [load[1] for load in loads]
        if self.policy == "least_kv":
            self._heap = [(kv, n, i) for i, (n, kv) in enumerate(loads)]
        else:
            self._heap = [(n, i) for i, (n, _kv) in enumerate(loads)]
        heapq.heapify(self._heap)

    def choose(self) -> int:
        if self.policy == "round_robin":
            chosen = self._next % self.count
            self._next += 1
        elif self.policy == "power_of_two":
            first, second = self._rng.sample(range(self.count), 2)
            chosen = first if self.outstanding[first] <= self.outstanding[second] else second
        elif self.policy == "least_kv":  # KV usage is only known as of the scrape
            kv, n, chosen = self._heap[0]
            heapq.heapreplace(self._heap, (kv, n + 1, chosen))
        else:
            n, chosen = self._heap[0]
            heapq.heapreplace(self._heap, (n + 1, chosen))
        self.outstanding[chosen] += 1
        return chosen


class _Clock:
    """What an observer reads as the cluster's clock (`env.now`) between intervals."""

    now = 0.0


class _Monitor:
    """The merged metrics windows (`Monitor.rows`) and the fleet's KV utilisation, after the run."""

    def __init__(self):
        self.rows: list[dict] = []
        self.kv_utilization: float | None = None
        self.price_usd_per_gpu_hour = 0.0


class ParallelCluster:
    """A fixed fleet run in intervals of the router's staleness (module docstring); reads like a
    `Cluster` to `summarize` and the planner's watch (records, replicas, monitor, env.now)."""

    def __init__(
        self, config: ClusterConfig, trace, prompt_ids, prompt_hashes, shards: ShardSpec | None
    ):
        self.config = config
        self.trace, self.prompt_ids, self.prompt_hashes = trace, prompt_ids, prompt_hashes
        self.shard_spec = shards or ShardSpec()
        self.arrival_s = trace.arrival_s.tolist()
        self.records = [
            RequestRecord(
                index=i,
                tenant=tenant,
                arrival_s=arrival,
                prompt_tokens=prompt,
                expected_output_tokens=output,
            )
            for i, (arrival, prompt, output, tenant) in enumerate(
                zip(
                    self.arrival_s,
                    trace.prompt_tokens.tolist(),
                    trace.output_tokens.tolist(),
                    trace.tenant.tolist(),
                )
            )
        ]
        self.env, self.monitor = _Clock(), _Monitor()
        # before the run, what may be set on each replica; after it, the replicas' reports
        self.replicas: list = [
            ReplicaSetup(i, config.max_stretch_steps) for i in range(config.initial_replicas)
        ]
        self.autoscaler = None

    def _shard_args(self) -> tuple[list[tuple], list[int]]:
        """Each shard's replicas (contiguous ranges), and each replica's position in its shard."""
        count = self.config.initial_replicas
        workers = min(self.shard_spec.workers, count)
        bounds = [count * k // workers for k in range(workers + 1)]
        args, position = [], []
        for low, high in zip(bounds, bounds[1:]):
            args.append(
                (
                    self.config,
                    list(range(low, high)),
                    self.trace,
                    self.prompt_ids,
                    self.prompt_hashes,
                    [r.max_stretch_steps for r in self.replicas[low:high]],
                )
            )
            position += list(range(high - low))
        return args, position

    def run(
        self, horizon_s: float | None = None, progress: Callable[[float], None] | None = None
    ) -> float:
        """Runs until every request has ended (or the horizon); returns the end time."""
        config, records = self.config, self.records
        interval = config.router_staleness_s
        # intervals one advance may merge: a give-up inside it must retry after its end
        reach = min(config.window_s, config.retry_backoff_s if config.max_retries else float("inf"))
        max_skip = max(1, int(reach / interval))
        args, position = self._shard_args()
        shard_of = [k for k, a in enumerate(args) for _ in a[1]]
        router = StaleRouter(config.router_policy, config.initial_replicas, config.seed)
        total, arrivals = len(records), self.arrival_s
        pending: list[tuple[float, int, int]] = []  # retries: (time, index, attempt)
        next_arrival, open_count, end_s, next_report = 0, total, 0.0, 0.0
        shards = start_shards(self.shard_spec, args)
        try:
            # as `Cluster.run`: the driver's routing and merging make no cyclic garbage, and a
            # collection would walk every record (the shards' workers started before the pause)
            with collector_paused():
                epoch, now = 0, 0.0  # now = epoch x interval: the last scrape
                while open_count:
                    if progress is not None:
                        while next_report <= now:
                            progress(1.0 - open_count / max(total, 1))
                            next_report += config.window_s
                    upcoming = min(
                        arrivals[next_arrival] if next_arrival < total else float("inf"),
                        pending[0][0] if pending else float("inf"),
                    )
                    target = epoch + max_skip
                    if upcoming < (epoch + 1) * interval:
                        target = epoch + 1
                    elif upcoming < target * interval:  # advance to the scrape before it
                        target = max(epoch + 1, int(upcoming // interval))
                        while target * interval > upcoming:
                            target -= 1
                    until = target * interval
                    if horizon_s is not None and until >= horizon_s:
                        until = horizon_s
                    batches: list[list[tuple]] = [[] for _ in args]
                    while upcoming < until:
                        if next_arrival < total and arrivals[next_arrival] == upcoming:
                            index, attempt = next_arrival, 0
                            next_arrival += 1
                        else:
                            _, index, attempt = heapq.heappop(pending)
                        replica = router.choose()
                        batches[shard_of[replica]].append(
                            (max(upcoming, now), index, attempt, position[replica])
                        )
                        upcoming = min(
                            arrivals[next_arrival] if next_arrival < total else float("inf"),
                            pending[0][0] if pending else float("inf"),
                        )
                    loads: list[tuple[int, float]] = []
                    for ended, shard_loads in shards.advance(batches, until):
                        loads += shard_loads
                        for item in ended:
                            if self._merge(item, pending):
                                open_count -= 1
                                end_s = max(end_s, item[-1])
                    router.scrape(loads)
                    epoch, now = target, until
                    self.env.now = now
                    if horizon_s is not None and now >= horizon_s:
                        break
                end_s = now if open_count else end_s
                self._finish(shards.finish(end_s), end_s)
        finally:
            shards.close()
        for record in records:
            if record.status == "pending":
                record.status = "in_flight"
        self.env.now = end_s
        return end_s

    def _merge(self, item: tuple, pending: list) -> int:
        """An attempt that ended in a shard: into the request's record; a give-up is retried after its
        back-off (as `Cluster._give_up`) or closes the request. 1 when the request has ended."""
        index, attempt, status, sent_s, replica, preemptions, output, ttft, e2e, queue, at_s = item
        record = self.records[index]
        record.sent_s, record.retries, record.replica = sent_s, attempt, replica
        record.num_preemptions += preemptions
        if status == "ok":
            record.status, record.output_tokens = "ok", output
            record.ttft_s, record.e2e_s, record.queue_s = ttft, e2e, queue
            return 1
        if attempt < self.config.max_retries:
            backoff = self.config.retry_backoff_s * 2**attempt
            heapq.heappush(pending, (at_s + backoff, index, attempt + 1))
            return 0
        record.status = status
        return 1

    def _finish(self, results: list[tuple], end_s: float) -> None:
        """The replicas' reports in fleet order, and the metrics windows merged over the shards."""
        self.replicas = sorted(
            (r for _, _, reports in results for r in reports), key=lambda r: r.replica_id
        )
        busy_s = sum(r.busy_s for r in self.replicas)
        self.monitor.kv_utilization = (
            sum(r.kv_utilization_busy_s for r in self.replicas) / busy_s if busy_s else None
        )
        self.monitor.rows = merge_rows([(rows, parts) for rows, parts, _ in results], self)

    def gpu_hours(self, end_s: float) -> float:
        return Cluster.gpu_hours(self, end_s)

    def cost_usd(self, end_s: float) -> float:
        return Cluster.cost_usd(self, end_s)

    @property
    def num_starting(self) -> int:
        return 0


def merge_rows(shards: list[tuple[list[dict], list[dict]]], cluster: ParallelCluster) -> list[dict]:
    """One fleet row per window from the shards' rows of it (the fields of `Monitor._row`): counts
    summed, then divided by the window; KV usage the mean over every replica in fleet order; P99 TTFT
    over all. Sums are of integers or in fleet order, so the rows do not depend on the sharding."""
    import numpy as np

    merged = []
    for window in zip(*(zip(rows, parts) for rows, parts in shards)):
        rows, parts = [row for row, _ in window], [part for _, part in window]
        first, seconds = rows[0], parts[0]["window"]
        usage = sorted(u for part in parts for u in part["kv_usage"])
        stored, reserved = sum(p["stored"] for p in parts), sum(p["reserved"] for p in parts)
        ttfts = [t for part in parts for t in part["ttfts"]]
        gpu_hours = cluster.gpu_hours(first["time_s"])
        row = {
            "time_s": first["time_s"],
            "offered_rps": sum(p["arrivals"] for p in parts) / seconds,
            "served_rps": sum(p["finishes"] for p in parts) / seconds,
            "output_tokens_per_s": sum(p["tokens"] for p in parts) / seconds,
            "waiting": sum(r["waiting"] for r in rows),
            "running": sum(r["running"] for r in rows),
            "kv_usage": float(np.mean([u for _, u in usage])) if usage else 0.0,
            "kv_utilization": stored / reserved if reserved else None,
            "block_allocations_per_s": sum(p["allocations"] for p in parts) / seconds,
            "preemptions": sum(r["preemptions"] for r in rows),
            "ttft_p99_s": float(np.percentile(ttfts, 99)) if ttfts else None,
            "replicas_serving": sum(r["replicas_serving"] for r in rows),
            "replicas_starting": sum(r["replicas_starting"] for r in rows),
            "gpu_hours": gpu_hours,
            "cost_usd": gpu_hours * cluster.monitor.price_usd_per_gpu_hour,
        }
        if "window_s" in first:
            row["window_s"] = first["window_s"]
        merged.append(row)
    return merged
