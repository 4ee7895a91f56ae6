"""The cluster's time series, one row per window: offered and served load, waiting and running requests,
KV usage and utilisation, block allocations per second, preemptions, P99 TTFT of the window, replicas
serving and starting, GPU-hours and cost so far. Read at window boundaries from each replica's state
as of its last completed step (what a Prometheus scrape of the engine would show)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from simulator.cluster.replica import SERVING, STOPPED

if TYPE_CHECKING:
    from simulator.cluster.cluster import Cluster
    from simulator.cluster.replica import Replica


class Monitor:
    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.rows: list[dict] = []
        self.ttfts_since_scrape: list[float] = []
        self._window_ttfts: list[float] = []
        self._arrivals = self._finishes = self._tokens = 0
        self._retired_allocations = self._retired_preemptions = 0
        self._last_allocations = self._last_preemptions = 0
        self.price_usd_per_gpu_hour = 0.0
        # per row, what a merge over shards of replicas needs (`simulator.cluster.parallel`); None: off
        self.parts: list[dict] | None = None
        cluster.env.process(self._sample())

    # ---- events ------------------------------------------------------------------------------
    def on_arrival(self) -> None:
        self._arrivals += 1

    def on_first_token(self, ttft_s: float) -> None:
        self._window_ttfts.append(ttft_s)
        self.ttfts_since_scrape.append(ttft_s)

    def on_finish(self, output_tokens: int) -> None:
        self._finishes += 1
        self._tokens += output_tokens

    def on_replica_stopped(self, replica: Replica) -> None:
        scheduler = replica.scheduler
        self._retired_allocations += scheduler.block_manager.num_allocations
        self._retired_preemptions += scheduler.num_preemptions

    # ---- sampling ----------------------------------------------------------------------------
    def _sample(self):
        env, window = self.cluster.env, self.cluster.config.window_s
        while True:
            yield env.timeout(window)
            self._row(env.now, window)

    def _totals(self) -> tuple[int, int]:
        live = [r for r in self.cluster.replicas if r.state != STOPPED]
        return (
            self._retired_allocations
            + sum(r.scheduler.block_manager.num_allocations for r in live),
            self._retired_preemptions + sum(r.scheduler.num_preemptions for r in live),
        )

    def _row(self, now: float, window: float) -> None:
        cluster = self.cluster
        active = [r for r in cluster.replicas if r.state != STOPPED and r.ready_at_s <= now]
        waiting = sum(r.snapshot[0] for r in active)
        running = sum(r.snapshot[1] for r in active)
        usage = float(np.mean([r.kv_usage for r in active])) if active else 0.0
        stored = reserved = 0
        for replica in active:
            stats = replica.scheduler.kv_stats()
            stored, reserved = stored + stats.tokens_stored, reserved + stats.slots_reserved
        allocations, preemptions = self._totals()
        gpu_hours = cluster.gpu_hours(now)
        if self.parts is not None:
            self.parts.append(
                {
                    "ttfts": self._window_ttfts,
                    "kv_usage": [(r.replica_id, r.kv_usage) for r in active],
                    "stored": stored,
                    "reserved": reserved,
                    "arrivals": self._arrivals,
                    "finishes": self._finishes,
                    "tokens": self._tokens,
                    "allocations": allocations - self._last_allocations,
                    "window": window,
                }
            )
        self.rows.append(
            {
                "time_s": now,
                "offered_rps": self._arrivals / window,
                "served_rps": self._finishes / window,
                "output_tokens_per_s": self._tokens / window,
                "waiting": waiting,
                "running": running,
                "kv_usage": usage,
                "kv_utilization": stored / reserved if reserved else None,
                "block_allocations_per_s": (allocations - self._last_allocations) / window,
                "preemptions": preemptions - self._last_preemptions,
                "ttft_p99_s": float(np.percentile(self._window_ttfts, 99))
                if self._window_ttfts
                else None,
                "replicas_serving": sum(
                    r.state == SERVING and r.ready_at_s <= now for r in cluster.replicas
                ),
                "replicas_starting": sum(
                    r.state != STOPPED and r.ready_at_s > now for r in cluster.replicas
                ),
                "gpu_hours": gpu_hours,
                "cost_usd": cluster.cost_usd(now),  # a split fleet: each pool at its GPU's price
            }
        )
        self._arrivals = self._finishes = self._tokens = 0
        self._window_ttfts = []
        self._last_allocations, self._last_preemptions = allocations, preemptions

    def close(self, end_s: float) -> None:
        """A last, partial window up to the end."""
        last = self.rows[-1]["time_s"] if self.rows else 0.0
        if end_s > last + 1e-9:
            self._row(end_s, end_s - last)
            self.rows[-1]["window_s"] = end_s - last

    @property
    def kv_utilization(self) -> float | None:
        """Tokens stored / slots reserved (1 − internal fragmentation) after each step, weighted by the
        step's time, over every replica's busy time: the live engine's own measure (`LiveEngine.run`).
        Sampling at window ends instead caught steps in flight, whose blocks are reserved before their
        tokens count as stored: 0.85 against the engine's 0.97 on a prefill-heavy trace."""
        replicas = self.cluster.replicas
        busy_s = sum(r.busy_s for r in replicas)
        return sum(r.kv_utilization_busy_s for r in replicas) / busy_s if busy_s else None

    def take_scrape_ttfts(self) -> list[float]:
        ttfts, self.ttfts_since_scrape = self.ttfts_since_scrape, []
        return ttfts
