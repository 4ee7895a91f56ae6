"""The simulated cluster: clients, router, replicas and autoscaler on one SimPy clock.

Clients send each request at its arrival time to a serving replica chosen by the router; a replica
whose waiting queue is full rejects it (as `surgeplan serve` answers 503). A client abandons a request
with no first token within its timeout (its KV blocks are freed at once) and may retry after a
back-off that doubles each time. Every request ends as one `RequestRecord`, the record type the
replay client writes, so one summary serves live and simulated runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import simpy

from engine.core.config import CacheConfig, SchedulerConfig
from engine.core.request import Request, RequestStatus
from engine.core.sampling_params import SamplingParams
from engine.core.scheduler import Scheduler
from simulator.calibration.cost_model import CostModel
from simulator.cluster.collector import collector_paused
from simulator.cluster.metrics import Monitor
from simulator.cluster.replica import SIM_TOKEN_ID, Replica
from simulator.cluster.router import Router
from simulator.cluster.serving_set import ServingSet
from traces.replay import RequestRecord


@dataclass(frozen=True)
class ClusterConfig:
    """What the cluster needs beyond the scenario's plain settings (resolved by `simulate`)."""

    scheduler_config: SchedulerConfig
    cache_config: CacheConfig
    cost_model: CostModel
    tensor_parallel: int
    initial_replicas: int
    router_policy: str
    max_waiting_per_replica: int | None
    ttft_timeout_s: float | None
    max_retries: int
    retry_backoff_s: float
    cold_start_s: float
    window_s: float
    scrape_interval_s: float | None
    seed: int
    max_stretch_steps: int = 256
    router_staleness_s: float = (
        0.0  # > 0: replicas advance in parallel (simulator.cluster.parallel)
    )
    host_tier_costs: tuple[float, float] | None = (
        None  # (load, recompute) seconds per block, host KV tier
    )
    max_concurrency: int | None = None  # closed loop: requests in flight from the clients


class Cluster(ServingSet):
    def __init__(
        self,
        config: ClusterConfig,
        arrival_s: list[float],
        prompt_tokens: list[int],
        output_tokens: list[int],
        tenants: list[str],
        prompt_ids: Callable[[int], list[int]] | None = None,
        prompt_hashes: Callable[[int], list[int]] | None = None,
    ):
        """`prompt_ids(i)`: request i's prompt tokens, a list the request keeps and nothing changes
        (default: `placeholder_prompt`);
        `prompt_hashes(i)`: the prefix cache's hashes of its leading blocks, where the trace names them
        (hash ids), set on each of its requests so those blocks are never hashed from tokens."""
        self.config = config
        self.env = simpy.Environment()
        self.router = Router(config.router_policy, config.seed)
        self.arrival_s, self.prompt_tokens, self.output_tokens, self.tenants = (
            arrival_s,
            prompt_tokens,
            output_tokens,
            tenants,
        )
        self.prompt_ids = prompt_ids or self.placeholder_prompt
        self._placeholders: dict[int, list[int]] = {}  # prompt length -> its placeholder prompt
        self.prompt_hashes = prompt_hashes
        self.records = [
            RequestRecord(
                index=i,
                tenant=tenants[i],
                arrival_s=arrival_s[i],
                prompt_tokens=prompt_tokens[i],
                expected_output_tokens=output_tokens[i],
            )
            for i in range(len(arrival_s))
        ]
        self.replicas: list[Replica] = []
        self.autoscaler = None  # set by `simulate` when enabled
        self.serving: list[Replica] = []
        self._attempts: dict[
            str, tuple[int, int, Replica]
        ] = {}  # request id -> (index, attempt, replica)
        # max_tokens -> the settings every simulated request of that length shares (read-only)
        self._sampling: dict[int, SamplingParams] = {}
        self._open = len(arrival_s)
        self._in_flight = 0  # sent by the clients and not yet ended (`max_concurrency`)
        self._slot_freed: simpy.Event | None = None
        self.done = self.env.event()
        self.monitor = Monitor(self)
        for _ in range(config.initial_replicas):
            self.add_replica(cold_start_s=0.0)
        self.env.process(self._arrivals())
        if self._open == 0:
            self.done.succeed()

    # ---- replicas ------------------------------------------------------------------------------
    def add_replica(self, cold_start_s: float) -> Replica:
        config = self.config
        scheduler = Scheduler(config.scheduler_config, config.cache_config)
        if scheduler.block_manager.host_tier is not None and config.host_tier_costs is not None:
            scheduler.block_manager.host_tier.set_costs(*config.host_tier_costs)
        replica = Replica(
            self.env,
            len(self.replicas),
            scheduler,
            config.cost_model,
            self.env.now + cold_start_s,
            self._on_progress,
            self.next_observation_s,
            config.max_stretch_steps,
            on_stopped=self.monitor.on_replica_stopped,
            on_load_change=self.router.observe if self.router.index is not None else None,
        )
        if self.router.policy == "prefix_affinity":  # it reads prefix caches between steps
            replica.rides_out_arrivals = False
        self.replicas.append(replica)
        self._enlist_when_serving(replica)
        return replica

    def next_observation_s(self, now: float) -> float:
        """The next time anything reads the replicas' state: a metrics window or a scrape."""
        window = self.config.window_s
        upcoming = (math.floor(now / window) + 1) * window
        scrape = self.config.scrape_interval_s
        if scrape is not None:
            upcoming = min(upcoming, (math.floor(now / scrape) + 1) * scrape)
        return upcoming

    # ---- clients -------------------------------------------------------------------------------
    def _arrivals(self):
        """Each request sent at its arrival; with `max_concurrency` N, a request arriving while N are
        in flight waits at the client until one ends (benchmark_serving's semaphore) and counts as
        arriving when sent: its record's arrival, TTFT and E2E are timed from the send, as
        benchmark_serving times them."""
        env, limit = self.env, self.config.max_concurrency
        for index, arrival in enumerate(self.arrival_s):
            if arrival > env.now:
                yield env.timeout(arrival - env.now)
            while limit is not None and self._in_flight >= limit:
                self._slot_freed = env.event()
                yield self._slot_freed
            if env.now > arrival:
                self.arrival_s[index] = self.records[index].arrival_s = env.now
            self._in_flight += 1
            self.monitor.on_arrival()
            self._attempt(index, 0)

    def _attempt(self, index: int, attempt: int) -> None:
        self._send(index, attempt, self.router.choose(self.serving, self._probe(index)))

    def _send(self, index: int, attempt: int, replica: Replica) -> None:
        """Request `index`'s attempt, sent now to `replica` (rejected when its waiting queue is full)."""
        config, record = self.config, self.records[index]
        record.sent_s, record.retries, record.replica = self.env.now, attempt, replica.replica_id
        if (
            config.max_waiting_per_replica is not None
            and len(replica.scheduler.waiting) >= config.max_waiting_per_replica
        ):
            self._give_up(index, attempt, "rejected")
            return
        max_tokens = self.output_tokens[index]
        params = self._sampling.get(max_tokens)  # (read-only: requests of one length share one)
        if params is None:
            params = self._sampling[max_tokens] = SamplingParams(
                temperature=0.0, max_tokens=max_tokens, ignore_eos=True
            )
        request = Request(
            f"{index}.{attempt}",
            self.prompt_ids(index),
            params,
            self.env.now,
            self.tenants[index],
            copy_prompt=False,  # (read-only lists: see `prompt_ids`)
        )
        request.uniform_output_token = SIM_TOKEN_ID  # every simulated token: counted, not stored
        if self.prompt_hashes is not None:
            request.block_hashes = self.prompt_hashes(index)
        self._attempts[request.request_id] = (index, attempt, replica)
        if replica.front_end_s > 0.0:  # the API server's latency first, then the scheduler
            replica.enter_front_end(request)
            self.env.timeout(replica.front_end_s).callbacks.append(
                lambda _event: replica.leave_front_end(request, to_scheduler=True)
            )
        else:
            replica.add_request(request)
        if config.ttft_timeout_s is not None:
            self.env.timeout(config.ttft_timeout_s).callbacks.append(
                lambda _event: self._check_timeout(request)
            )

    def placeholder_prompt(self, index: int) -> list[int]:
        """Request `index`'s prompt where no token is read (no prefix cache: only its length counts): the
        sampled token repeated, one list per length, shared by the requests of that length (a request
        never changes its prompt's list), so an overloaded run does not hold a list per queued request."""
        length = self.prompt_tokens[index]
        prompt = self._placeholders.get(length)
        if prompt is None:
            prompt = self._placeholders[length] = [SIM_TOKEN_ID] * length
        return prompt

    def _probe(self, index: int) -> Request:
        """What the router looks at: the request as it will be sent (prefix affinity hashes its prompt)."""
        if self.router.policy != "prefix_affinity":
            return None  # type: ignore[return-value]
        probe = Request(
            "probe",
            self.prompt_ids(index),
            SamplingParams(max_tokens=1),
            self.env.now,
            copy_prompt=False,
        )
        if self.prompt_hashes is not None:
            probe.block_hashes = self.prompt_hashes(index)
        return probe

    def _check_timeout(self, request: Request) -> None:
        if request.first_token_time is not None or request.is_finished:
            return
        index, attempt, replica = self._attempts.pop(request.request_id)
        if not replica.leave_front_end(request, to_scheduler=False):  # else never scheduled
            replica.abort_request(request)
        self.records[index].num_preemptions += request.num_preemptions
        self._give_up(index, attempt, "timeout")

    def _give_up(self, index: int, attempt: int, status: str) -> None:
        if attempt < self.config.max_retries:
            backoff = self.config.retry_backoff_s * 2**attempt
            self.env.timeout(backoff).callbacks.append(
                lambda _event: self._attempt(index, attempt + 1)
            )
            return
        self.records[index].status = status
        self._close(index)

    def _ttft_s(self, request: Request) -> float:
        """Seconds from the request's arrival (its trace index leads its id) to its first token."""
        return request.first_token_time - self.arrival_s[int(request.request_id.split(".")[0])]

    def _on_progress(self, request: Request) -> None:
        if request.first_token_time == self.env.now:
            self.monitor.on_first_token(self._ttft_s(request))
        if not request.is_finished or request.status is RequestStatus.FINISHED_ABORTED:
            return
        index, _attempt, replica = self._attempts.pop(request.request_id)
        record = self.records[index]
        arrival = self.arrival_s[index]
        record.status = "ok"
        record.output_tokens = request.num_output_tokens
        record.ttft_s = request.first_token_time - arrival
        record.e2e_s = request.finish_time - arrival
        record.queue_s = request.first_scheduled_time - arrival
        record.num_preemptions += request.num_preemptions
        self.monitor.on_finish(request.num_output_tokens)
        self._close(index)

    def _close(self, index: int) -> None:
        """Request `index` has ended (its record is final): its client's slot is free."""
        self._open -= 1
        self._in_flight -= 1
        if self._slot_freed is not None and not self._slot_freed.triggered:
            self._slot_freed.succeed()
        if self._open == 0 and not self.done.triggered:
            self.done.succeed()

    # ---- running -------------------------------------------------------------------------------
    def run(
        self, horizon_s: float | None = None, progress: Callable[[float], None] | None = None
    ) -> float:
        """Runs until every request has ended (or the horizon); returns the end time."""
        env = self.env
        if progress is not None:
            env.process(self._report(progress))
        until = self.done if horizon_s is None else env.any_of([self.done, env.timeout(horizon_s)])
        with collector_paused():
            env.run(until=until)
        end = env.now
        for index, request_id in ((index, rid) for rid, (index, _a, _r) in self._attempts.items()):
            self.records[index].status = "in_flight"
        self.monitor.close(end)
        return end

    def _report(self, progress: Callable[[float], None]):
        total = max(len(self.arrival_s), 1)
        while not self.done.triggered:
            progress(1.0 - self._open / total)
            yield self.env.timeout(self.config.window_s)

    def gpu_hours(self, end_s: float) -> float:
        seconds = sum(
            (min(r.stopped_at_s, end_s) if r.stopped_at_s is not None else end_s) - r.requested_at_s
            for r in self.replicas
        )
        return seconds * self.config.tensor_parallel / 3600.0

    def cost_usd(self, end_s: float) -> float:
        return self.gpu_hours(end_s) * self.monitor.price_usd_per_gpu_hour
