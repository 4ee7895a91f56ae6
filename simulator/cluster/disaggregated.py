"""A disaggregated cluster: a prefill pool and a decode pool, each with its own replicas (of its own TP
degree and batch settings), router, autoscaler and time series, and the KV moved between them over a
link. The replicas run the engine's own scheduler in its prefill or decode role (`engine.core.kv_handoff`).

A request goes to a prefill replica (the prefill pool's router); when its first token is sampled the
prefill replica hands it over, still holding its KV blocks; the decode pool's router picks a decode
replica, which reserves blocks for the KV as soon as it has room (at a step boundary), then receives
the bytes over the link (`simulator.links`: latency + bytes / bandwidth; each decode replica receives
one transfer at a time, and the transfers leaving one prefill replica share its link's bandwidth,
`simulator.cluster.shared_link`); the prefill replica frees its blocks when the transfer ends, and the decode replica
admits the request at its next step. TTFT is the prefill replica's first token; the transfer shows in
the first inter-token gap, as on DistServe / Splitwise deployments. With Splitwise's mixed pool on
(`simulator.cluster.mixed_pool`), a decode replica may serve a new request whole and a prefill replica
may decode what it prefilled, both without a transfer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import simpy

from engine.core.config import CacheConfig, SchedulerConfig
from engine.core.kv_handoff import handoff_copy, kv_tokens
from engine.core.request import Request, RequestStatus
from engine.core.scheduler import Scheduler
from simulator.calibration.cost_model import CostModel
from simulator.cluster.cluster import Cluster, ClusterConfig
from simulator.cluster.metrics import Monitor
from simulator.cluster.mixed_pool import MixedPool
from simulator.cluster.replica import Replica
from simulator.cluster.router import Router
from simulator.cluster.serving_set import ServingSet
from simulator.cluster.shared_link import SharedLink
from simulator.links import LinkSpec


@dataclass(frozen=True)
class PoolConfig:
    name: str  # "prefill" or "decode"
    scheduler_config: SchedulerConfig
    cache_config: CacheConfig
    cost_model: CostModel
    tensor_parallel: int
    initial_replicas: int
    router_policy: str
    window_s: float
    seed: int
    host_tier_costs: tuple[float, float] | None = (
        None  # (load, recompute) seconds per block, host KV tier
    )
    gpu: str = ""  # the pool's GPU (catalog name): its step costs and KV pool are this GPU's
    price_usd_per_gpu_hour: float = 0.0  # that GPU's catalog price


class PrefillReplica(Replica):
    """Hands each request over after the step that sampled its first token."""

    rides_out_arrivals = False  # its steps' ends hand requests over

    on_handoff: Callable[[PrefillReplica, Request], None]
    on_free: Callable[[Replica], None] | None = None  # told when it runs empty (the mixed pool)

    def _after_steps(self, *args, **kwargs) -> None:
        super()._after_steps(*args, **kwargs)
        for request in self.scheduler.take_handed_over():
            self.on_handoff(self, request)

    def keep(self, request: Request) -> None:
        """Decode a request taken from the outbox here (the mixed pool), on the blocks it holds."""
        self.scheduler.take_back(request, self.env.now)
        self._load_changed()
        self._poke()

    def _idle(self):
        _tell_free(self)
        yield from super()._idle()

    def release(self, request: Request) -> None:
        self.scheduler.release_handed_over(request)
        self._load_changed()
        self._poke()


class DecodeReplica(Replica):
    """Reserves blocks for incoming KV at step boundaries and receives it over its link, one at a time."""

    rides_out_arrivals = False  # its steps' ends reserve blocks for incoming KV

    transfer: Callable[[DecodeReplica, Request], simpy.events.ProcessGenerator]
    on_free: Callable[[Replica], None] | None = None  # told when it runs empty (the mixed pool)

    def receive(self, request: Request) -> None:
        self.scheduler.receive(request)
        self._load_changed()
        self._poke()

    def start_transfers(self) -> None:
        for request in self.scheduler.start_receives():
            self.env.process(self.transfer(self, request))

    def finish_receive(self, request: Request) -> None:
        self.scheduler.finish_receive(request)
        self._poke()

    def _after_steps(self, *args, **kwargs) -> None:
        super()._after_steps(*args, **kwargs)
        if self.scheduler.handoffs.incoming:
            self.start_transfers()

    def _idle(self):
        if self.scheduler.handoffs.incoming:  # no step in progress: a boundary
            self.start_transfers()
        _tell_free(self)
        yield from super()._idle()


def _tell_free(replica: PrefillReplica | DecodeReplica) -> None:
    if replica.on_free is not None and not replica.scheduler.has_unfinished_requests():
        replica.on_free(replica)


class Pool(ServingSet):
    """One role's replicas, with what `Monitor` and `Autoscaler` read of a cluster."""

    def __init__(
        self, cluster: DisaggregatedCluster, config: PoolConfig, replica_class: type[Replica]
    ):
        self.cluster = cluster
        self.env = cluster.env
        self.config = config
        self.name = config.name
        self.replica_class = replica_class
        self.router = Router(config.router_policy, config.seed)
        self.replicas: list[Replica] = []
        self.serving: list[Replica] = []
        self.autoscaler = None
        self.monitor = Monitor(self)
        self.monitor.price_usd_per_gpu_hour = config.price_usd_per_gpu_hour

    def add_replica(self, cold_start_s: float) -> Replica:
        config, cluster = self.config, self.cluster
        scheduler = Scheduler(config.scheduler_config, config.cache_config)
        if scheduler.block_manager.host_tier is not None and config.host_tier_costs is not None:
            scheduler.block_manager.host_tier.set_costs(*config.host_tier_costs)
        replica = self.replica_class(
            self.env,
            len(cluster.replicas),
            scheduler,
            config.cost_model,
            self.env.now + cold_start_s,
            cluster.progress_handler(self),
            cluster.next_observation_s,
            cluster.config.max_stretch_steps,
            on_stopped=self._on_stopped,
            on_load_change=self.router.observe if self.router.index is not None else None,
        )
        replica.pool = self.name
        replica.tensor_parallel = config.tensor_parallel
        if cluster.mixed_pool is not None:
            replica.on_free = cluster.mixed_pool.on_free
        if isinstance(replica, PrefillReplica):
            replica.on_handoff = cluster.hand_over
            replica.link_out = SharedLink(self.env, cluster.link_bandwidth_bytes_per_s)
        else:
            replica.transfer = cluster.transfer
            replica.link = simpy.Resource(self.env, capacity=1)
        cluster.replicas.append(replica)
        self.replicas.append(replica)
        self._enlist_when_serving(replica)
        return replica

    def _on_stopped(self, replica: Replica) -> None:
        self.monitor.on_replica_stopped(replica)
        self.cluster.monitor.on_replica_stopped(replica)

    def gpu_hours(self, end_s: float) -> float:
        return _gpu_hours(self.replicas, end_s)

    def cost_usd(self, end_s: float) -> float:
        return self.gpu_hours(end_s) * self.config.price_usd_per_gpu_hour


def _gpu_hours(replicas: list[Replica], end_s: float) -> float:
    return (
        sum(
            (
                (min(r.stopped_at_s, end_s) if r.stopped_at_s is not None else end_s)
                - r.requested_at_s
            )
            * r.tensor_parallel
            for r in replicas
        )
        / 3600.0
    )


class DisaggregatedCluster(Cluster):
    """`Cluster`'s clients and records, with the prefill pool in the router's place."""

    def __init__(
        self,
        config: ClusterConfig,
        prefill: PoolConfig,
        decode: PoolConfig,
        link: LinkSpec,
        kv_bytes_per_token: int,  # in the KV cache's dtype (fp8 / int8: half of bf16's)
        arrival_s: list[float],
        prompt_tokens: list[int],
        output_tokens: list[int],
        tenants: list[str],
        prompt_ids: Callable[[int], list[int]] | None = None,
        prompt_hashes: Callable[[int], list[int]] | None = None,
        mixed_pool_max_pending_tokens: int | None = None,  # None: no mixed pool
    ):
        self.link = link
        # one prefill replica's links together: each of its transfers goes over min(prefill TP,
        # decode TP) of them (`LinkSpec.transfer_s`), and concurrent ones share them
        self.link_bandwidth_bytes_per_s = link.bandwidth_bytes_per_s * min(
            prefill.tensor_parallel, decode.tensor_parallel
        )
        self.kv_bytes_per_token = kv_bytes_per_token
        self.transfer_bytes: list[int] = []
        self.transfer_s: list[
            float
        ] = []  # link time of each transfer (latency + bytes / bandwidth)
        self.transfer_wait_s: list[float] = []  # queueing for the decode replica's link before it
        self._handed: dict[str, tuple[PrefillReplica, Request]] = {}
        self.mixed_pool: MixedPool | None = None
        super().__init__(
            config, arrival_s, prompt_tokens, output_tokens, tenants, prompt_ids, prompt_hashes
        )  # 0 replicas
        self.pools = {
            "prefill": Pool(self, prefill, PrefillReplica),
            "decode": Pool(self, decode, DecodeReplica),
        }
        self.router, self.serving = self.pools["prefill"].router, self.pools["prefill"].serving
        if mixed_pool_max_pending_tokens is not None:
            self.mixed_pool = MixedPool(
                self.pools["prefill"], self.pools["decode"], mixed_pool_max_pending_tokens
            )
        for pool in self.pools.values():
            for _ in range(pool.config.initial_replicas):
                pool.add_replica(cold_start_s=0.0)

    def add_replica(self, cold_start_s: float) -> Replica:
        raise TypeError(
            "a disaggregated cluster adds replicas to a pool: cluster.pools[name].add_replica"
        )

    def _attempt(self, index: int, attempt: int) -> None:
        choice = self.router.choose(self.serving, self._probe(index))
        if self.mixed_pool is not None:  # a long prefill queue: a decode replica may serve it whole
            choice = self.mixed_pool.route(choice, self.prompt_tokens[index])
        self._send(index, attempt, choice)

    # ---- the hand-over ---------------------------------------------------------------------------
    def progress_handler(self, pool: Pool) -> Callable[[Request], None]:
        if pool.name == "decode":
            return self._on_decode_progress
        return self._on_prefill_progress

    def _on_prefill_progress(self, request: Request) -> None:
        if request.status is RequestStatus.HANDED_OVER:  # served, as far as the prefill pool goes
            ttft_s = self._ttft_s(request)
            self.monitor.on_first_token(ttft_s)
            self.pools["prefill"].monitor.on_first_token(ttft_s)
            self.pools["prefill"].monitor.on_finish(1)
            return
        self._on_progress(request)  # a 1-token request finishes on the prefill side

    def _on_decode_progress(self, request: Request) -> None:
        if request.first_token_time == self.env.now:  # served whole here (the mixed pool)
            self.pools["decode"].monitor.on_first_token(self._ttft_s(request))
        if request.is_finished and request.status is not RequestStatus.FINISHED_ABORTED:
            self.pools["decode"].monitor.on_finish(request.num_output_tokens)
        self._on_progress(request)

    def hand_over(self, replica: PrefillReplica, request: Request) -> None:
        if self.mixed_pool is not None and self.mixed_pool.keeps(replica, request):
            replica.keep(request)  # no decode replica has room: it decodes here
            return
        decode = self.pools["decode"]
        copy = handoff_copy(request)
        target = (
            decode.router.choose(decode.serving, copy) if decode.serving else decode.replicas[0]
        )
        self._handed[request.request_id] = (replica, request)
        index, attempt, _ = self._attempts[request.request_id]
        self._attempts[request.request_id] = (index, attempt, target)
        target.receive(copy)

    def transfer(self, replica: DecodeReplica, request: Request):
        """The KV of `request` (blocks reserved on `replica`) over the link; then both sides move on."""
        source, original = self._handed.pop(request.request_id)
        num_bytes = kv_tokens(request) * self.kv_bytes_per_token
        queued_at = self.env.now
        with replica.link.request() as turn:
            yield turn
            started = self.env.now
            self.transfer_wait_s.append(started - queued_at)
            # alone: latency + bytes / (bandwidth x min(TPs)), as `LinkSpec.transfer_s`; beside other
            # transfers from the same prefill replica, a share of its bandwidth
            yield self.env.timeout(self.link.latency_s)
            yield source.link_out.send(num_bytes)
        self.transfer_bytes.append(num_bytes)
        self.transfer_s.append(self.env.now - started)
        source.release(original)
        replica.finish_receive(request)

    # ---- running and accounting ------------------------------------------------------------------
    def run(
        self, horizon_s: float | None = None, progress: Callable[[float], None] | None = None
    ) -> float:
        end = super().run(horizon_s, progress)
        for pool in self.pools.values():
            pool.monitor.close(end)
        return end

    def gpu_hours(self, end_s: float) -> float:
        return _gpu_hours(self.replicas, end_s)

    def cost_usd(self, end_s: float) -> float:
        """Each pool's GPU-hours at its own GPU's price."""
        return sum(pool.cost_usd(end_s) for pool in self.pools.values())

    @property
    def num_starting(self) -> int:
        return sum(pool.num_starting for pool in self.pools.values())
