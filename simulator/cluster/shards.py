"""Shards of a parallel run's replicas, and where they run: this process, worker processes or Ray.

A `Shard` is a `Cluster` holding some of the fleet's replicas on its own SimPy clock, with no router
and no arrivals of its own: the driver (`simulator.cluster.parallel`) hands it the attempts it routed
to them, each with its time, and the time to advance to. The shard sends them with the cluster's own
`_send` (waiting-queue limit, client timeout and all), runs, and reports each attempt that ended (a
finish, or a give-up the driver may retry) and each replica's load at the end of the interval. At the
end it reports its replicas' counters and its metrics windows, which the driver merges.

`ShardSpec` says where: `workers` shards, in this process (1), in local worker processes, or as Ray
actors (`backend="ray"`, a local instance unless `ray_address`). The answer never depends on it.
"""

from __future__ import annotations

import math
import multiprocessing
import os
from dataclasses import dataclass

import simpy

from simulator.cluster.cluster import Cluster, ClusterConfig
from simulator.cluster.collector import collector_paused
from simulator.cluster.metrics import Monitor
from simulator.cluster.router import Router
from traces.replay import RequestRecord


@dataclass(frozen=True)
class ShardSpec:
    """Where a parallel run's replicas advance: `workers` shards, local (1: this process; more:
    worker processes) or on Ray."""

    workers: int = 1
    backend: str = "local"  # local or ray
    ray_address: str | None = None

    def __post_init__(self):
        if self.workers < 1:
            raise ValueError(f"workers={self.workers}; expected ≥ 1")
        if self.backend not in ("local", "ray"):
            raise ValueError(f"backend {self.backend!r}; expected 'local' or 'ray'")


@dataclass(frozen=True)
class ReplicaReport:
    """What the summary reads of a replica after a parallel run (the names `summarize` reads)."""

    replica_id: int
    requested_at_s: float
    ready_at_s: float
    stopped_at_s: float | None
    num_steps: int
    busy_s: float
    kv_utilization_busy_s: float
    scheduler: SchedulerCounters


@dataclass(frozen=True)
class SchedulerCounters:
    num_preemptions: int
    block_manager: BlockCounters
    controller: object | None  # the SLO-aware batch controller, with its history (None: fixed)


@dataclass
class ReplicaSetup:
    """A replica of a parallel run before it starts: what a caller may set on it, as on a `Replica`
    (tests and benchmarks turn decode stretches off this way)."""

    replica_id: int
    max_stretch_steps: int


@dataclass(frozen=True)
class BlockCounters:
    num_prefix_queries: int
    num_prefix_hits: int
    num_allocations: int
    host_tier: TierCounters | None


@dataclass(frozen=True)
class TierCounters:
    hit_tokens: int
    num_hits: int
    num_stores: int


# an attempt that ended: (index, attempt, status, sent_s, replica, preemptions, output_tokens,
# ttft_s, e2e_s, queue_s, time it ended); status "ok", or the give-up's ("timeout", "rejected")
Ended = tuple


class Shard(Cluster):
    def __init__(
        self,
        config: ClusterConfig,
        replica_ids: list[int],
        trace,
        prompt_ids,
        prompt_hashes,
        stretches: list[int] | None = None,
    ):
        self.config = config
        self.env = simpy.Environment()
        self.router = Router("round_robin")  # never asked: the driver routes
        self.arrival_s = trace.arrival_s.tolist()
        self.prompt_tokens = trace.prompt_tokens.tolist()
        self.output_tokens = trace.output_tokens.tolist()
        self.tenants = trace.tenant.tolist()
        self.prompt_ids = prompt_ids or self.placeholder_prompt
        self._placeholders = {}
        self.prompt_hashes = prompt_hashes
        self.records: dict[int, RequestRecord] = {}  # index -> its attempt in progress here
        self.replicas, self.serving, self.autoscaler = [], [], None
        self._attempts, self._sampling = {}, {}
        self._ended: list[Ended] = []
        self.monitor = Monitor(self)
        self.monitor.parts = []
        for k, replica_id in enumerate(replica_ids):
            replica = self.add_replica(cold_start_s=0.0)
            replica.replica_id = replica_id
            if stretches is not None:
                replica.max_stretch_steps = stretches[k]

    def next_observation_s(self, now: float) -> float:
        """The driver's scrapes are observations too: a decode stretch ends before the next one (cut
        only at the scrapes the driver reads, stretched and stepped runs of a stale router drifted
        apart: tests/test_planner_batch_controller.py)."""
        interval = self.config.router_staleness_s
        return min(super().next_observation_s(now), (math.floor(now / interval) + 1) * interval)

    def advance(self, attempts: list[tuple], until_s: float) -> tuple[list[Ended], list[tuple]]:
        """Send `attempts` ((time, index, attempt, replica position)) at their times and run to
        `until_s`; the attempts that ended, and each replica's (outstanding, KV usage) then."""
        env = self.env
        for time_s, index, attempt, position in attempts:
            env.timeout(time_s - env.now).callbacks.append(
                lambda _event, i=index, a=attempt, p=position: self._arrive(i, a, p)
            )
        with collector_paused():
            env.run(until=until_s)
        ended, self._ended = self._ended, []
        loads = [(r.num_outstanding, r.kv_usage) for r in self.replicas]
        return ended, loads

    def _arrive(self, index: int, attempt: int, position: int) -> None:
        if attempt == 0:
            self.monitor.on_arrival()
        self.records[index] = RequestRecord(
            index=index,
            tenant=self.tenants[index],
            arrival_s=self.arrival_s[index],
            prompt_tokens=self.prompt_tokens[index],
            expected_output_tokens=self.output_tokens[index],
            retries=attempt,
        )
        self._send(index, attempt, self.replicas[position])

    def _give_up(self, index: int, attempt: int, status: str) -> None:
        self._report(index, attempt, status)  # the driver retries it or closes it

    def _close(self, index: int) -> None:
        self._report(index, self.records[index].retries, "ok")

    def _report(self, index: int, attempt: int, status: str) -> None:
        r = self.records.pop(index)
        self._ended.append(
            (index, attempt, status, r.sent_s, r.replica, r.num_preemptions, r.output_tokens)
            + (r.ttft_s, r.e2e_s, r.queue_s, self.env.now)
        )

    def finish(self, end_s: float) -> tuple[list[dict], list[dict], list[ReplicaReport]]:
        """The metrics windows up to `end_s` (rows and their merge parts) and the replicas' counters."""
        monitor = self.monitor
        keep = sum(row["time_s"] <= end_s + 1e-9 for row in monitor.rows)
        del monitor.rows[keep:], monitor.parts[keep:]
        monitor.close(end_s)
        return monitor.rows, monitor.parts, [_report(r) for r in self.replicas]


def _report(replica) -> ReplicaReport:
    scheduler, blocks = replica.scheduler, replica.scheduler.block_manager
    tier = blocks.host_tier
    return ReplicaReport(
        replica.replica_id,
        replica.requested_at_s,
        replica.ready_at_s,
        replica.stopped_at_s,
        replica.num_steps,
        replica.busy_s,
        replica.kv_utilization_busy_s,
        SchedulerCounters(
            scheduler.num_preemptions,
            BlockCounters(
                blocks.num_prefix_queries,
                blocks.num_prefix_hits,
                blocks.num_allocations,
                None
                if tier is None
                else TierCounters(tier.hit_tokens, tier.num_hits, tier.num_stores),
            ),
            scheduler.controller,
        ),
    )


# ---- where shards run --------------------------------------------------------------------------
class LocalShards:
    """Every shard in this process, one after the other."""

    def __init__(self, args: list[tuple]):
        self.shards = [Shard(*a) for a in args]

    def advance(self, attempts: list[list[tuple]], until_s: float) -> list[tuple]:
        return [shard.advance(a, until_s) for shard, a in zip(self.shards, attempts)]

    def finish(self, end_s: float) -> list[tuple]:
        return [shard.finish(end_s) for shard in self.shards]

    def close(self) -> None:
        self.shards = []


def _serve(connection, args: tuple) -> None:
    """A worker process: one shard, driven over `connection` until told to stop."""
    shard = Shard(*args)
    while True:
        command, *rest = connection.recv()
        if command == "advance":
            connection.send(shard.advance(*rest))
        elif command == "finish":
            connection.send(shard.finish(*rest))
        else:
            return


def default_worker_count() -> int:
    """Worker processes when a caller names no count (the planner's local backend, the published
    replays): one per CPU, at most 8."""
    return max(1, min(os.cpu_count() or 1, 8))


def worker_context() -> multiprocessing.context.BaseContext:
    """How the simulator starts worker processes: forked where the platform forks, else spawned. A
    fork carries this process's imports and never runs its `__main__` again, which an embedding
    host (Streamlit's script runner, a test's runpy) need not leave importable."""
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


class ProcessShards:
    """One worker process per shard (`worker_context`), each advancing at once; the driver waits
    for all at every synchronisation point."""

    def __init__(self, args: list[tuple]):
        context = worker_context()
        self.connections, self.processes = [], []
        for a in args:
            mine, theirs = context.Pipe()
            process = context.Process(target=_serve, args=(theirs, a), daemon=True)
            process.start()
            theirs.close()
            self.connections.append(mine)
            self.processes.append(process)

    def _all(self, message: tuple) -> list:
        for connection in self.connections:
            connection.send(message)
        return [connection.recv() for connection in self.connections]

    def advance(self, attempts: list[list[tuple]], until_s: float) -> list[tuple]:
        for connection, a in zip(self.connections, attempts):
            connection.send(("advance", a, until_s))
        return [connection.recv() for connection in self.connections]

    def finish(self, end_s: float) -> list[tuple]:
        return self._all(("finish", end_s))

    def close(self) -> None:
        for connection, process in zip(self.connections, self.processes):
            try:
                connection.send(("stop",))
            except (BrokenPipeError, OSError):
                pass
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
        self.connections, self.processes = [], []


class RayShards:
    """One Ray actor per shard, on the cluster at `address` or a local instance."""

    def __init__(self, args: list[tuple], address: str | None):
        try:
            import ray
        except ImportError:
            raise ValueError(
                "backend 'ray' needs Ray, which is not installed; expected `pip install "
                "surgeplan[ray]`, or the local backend"
            ) from None
        self._ray, self._owned = ray, not ray.is_initialized()
        if self._owned:
            options = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
            ray.init(address=address, **options) if address else ray.init(
                num_cpus=len(args), **options
            )
        actor = ray.remote(num_cpus=1)(Shard)
        self.actors = [actor.remote(*a) for a in args]

    def advance(self, attempts: list[list[tuple]], until_s: float) -> list[tuple]:
        calls = [a.advance.remote(x, until_s) for a, x in zip(self.actors, attempts)]
        return self._ray.get(calls)

    def finish(self, end_s: float) -> list[tuple]:
        return self._ray.get([a.finish.remote(end_s) for a in self.actors])

    def close(self) -> None:
        for actor in self.actors:
            self._ray.kill(actor)
        self.actors = []
        if self._owned:
            self._ray.shutdown()


def start_shards(spec: ShardSpec, args: list[tuple]):
    if spec.backend == "ray":
        return RayShards(args, spec.ray_address)
    return LocalShards(args) if len(args) == 1 else ProcessShards(args)
