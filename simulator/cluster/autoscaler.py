"""The autoscaler: every scrape interval it reads the serving replicas' metrics and adds or drains
replicas, as llm-d's variant autoscaler or a Kubernetes HPA on vLLM metrics would.

Scale out when mean KV usage ≥ its threshold, or waiting requests per serving replica ≥ theirs, or
(if set) the P99 TTFT of the last interval exceeds its bound, to the HPA's desired count
ceil(serving × max(metric / threshold)) (at least `step_replicas` more) — counting replicas already
starting, so one surge does not order new replicas every scrape while the first are still cold. Scale in (drain the
newest replica) after the fleet has been calm for the stabilisation window. No action within the
cooldown of the last one. A new replica serves only after its cold start.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from simulator.fleet_spec import AutoscalerSpec

if TYPE_CHECKING:
    from simulator.cluster.cluster import Cluster


class Autoscaler:
    def __init__(self, cluster: Cluster, spec: AutoscalerSpec, cold_start_s: float):
        self.cluster = cluster
        self.spec = spec
        self.cold_start_s = cold_start_s
        self.last_action_s = -float("inf")
        self.calm_since_s: float | None = 0.0
        self.decisions: list[dict] = []
        cluster.env.process(self._run())

    def _run(self):
        env = self.cluster.env
        while True:
            yield env.timeout(self.spec.scrape_interval_s)
            self.decide(env.now)

    def decide(self, now: float) -> None:
        spec, cluster = self.spec, self.cluster
        serving = list(cluster.serving)
        ttfts = cluster.monitor.take_scrape_ttfts()
        if not serving:
            return
        kv_usage = float(np.mean([r.kv_usage for r in serving]))
        waiting = sum(r.snapshot[0] for r in serving) / len(serving)
        ttft_p99 = float(np.percentile(ttfts, 99)) if ttfts else None
        starting = cluster.num_starting
        pressure = [
            name
            for name, hot in (
                ("kv_usage", kv_usage >= spec.kv_usage_threshold),
                ("waiting", waiting >= spec.waiting_per_replica_threshold),
                (
                    "ttft_p99",
                    spec.ttft_p99_threshold_s is not None
                    and ttft_p99 is not None
                    and ttft_p99 > spec.ttft_p99_threshold_s,
                ),
            )
            if hot
        ]
        calm = kv_usage < spec.scale_in_kv_usage and waiting == 0
        self.calm_since_s = (
            (self.calm_since_s if self.calm_since_s is not None else now) if calm else None
        )
        cooled = now - self.last_action_s >= spec.cooldown_s
        total = len(serving) + starting
        ratios = [kv_usage / spec.kv_usage_threshold, waiting / spec.waiting_per_replica_threshold]
        if spec.ttft_p99_threshold_s is not None and ttft_p99 is not None:
            ratios.append(ttft_p99 / spec.ttft_p99_threshold_s)
        desired = max(math.ceil(len(serving) * max(ratios)), len(serving) + spec.step_replicas)
        if pressure and cooled and desired > total and total < spec.max_replicas:
            added = min(desired, spec.max_replicas) - total
            for _ in range(added):
                cluster.add_replica(self.cold_start_s)
            self._record(now, "scale_out", added, pressure, kv_usage, waiting, ttft_p99)
        elif (
            calm
            and cooled
            and len(serving) > spec.min_replicas
            and now - self.calm_since_s >= spec.scale_in_stabilization_s
        ):
            cluster.drain_replica(serving[-1])
            self.calm_since_s = now
            self._record(now, "scale_in", 1, ["calm"], kv_usage, waiting, ttft_p99)

    def _record(
        self,
        now: float,
        action: str,
        count: int,
        reasons: list[str],
        kv_usage: float,
        waiting: float,
        ttft_p99: float | None,
    ) -> None:
        self.last_action_s = now
        self.decisions.append(
            {
                "time_s": now,
                "action": action,
                "replicas": count,
                "reasons": reasons,
                "kv_usage": kv_usage,
                "waiting_per_replica": waiting,
                "ttft_p99_s": ttft_p99,
            }
        )
