"""Routers: which serving replica a new request goes to.

round_robin; least_outstanding (fewest waiting + running, as llm-d's load-aware scorer); least_kv
(lowest KV usage as of the last step); power_of_two (two replicas drawn at random, the less loaded
wins: Mitzenmacher's power of two choices); prefix_affinity (most of the prompt's leading blocks
already cached on the replica, ties by load: as llm-d's prefix-cache scorer).

least_outstanding and least_kv do not scan the replicas per request: the router keeps the serving
replicas in a heap by load, told by the cluster when a replica starts or stops serving and by each
replica when its load changes, so a choice costs O(log replicas) amortised. It picks exactly what
`min` over the serving list would: the lowest load, ties to the replica that started serving first
(the serving list's order).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from engine.core.request import Request

if TYPE_CHECKING:
    from simulator.cluster.replica import Replica


def _outstanding(replica: Replica) -> int:
    """least_outstanding's load: requests waiting or running."""
    return replica.num_outstanding


def _kv_then_outstanding(replica: Replica) -> tuple[float, int]:
    """least_kv's load: KV usage as of the last step, then requests waiting or running."""
    return replica.kv_usage, replica.num_outstanding


# the policies that route by a load, with it
LOADS: dict[str, Callable[[Replica], Any]] = {
    "least_outstanding": _outstanding,
    "least_kv": _kv_then_outstanding,
}


class LoadIndex:
    """The serving replicas by (load, order of joining): the first is what `min(serving, key=load)`
    returns. A lazy heap: a change of load pushes a fresh entry, and entries no longer current are
    dropped when they reach the top; the heap is rebuilt when they outnumber the current ones."""

    def __init__(self, load: Callable[[Replica], Any]):
        self._load = load
        self._heap: list[tuple[Any, int]] = []  # (load, order)
        self._current: dict[int, tuple[Any, int]] = {}  # order -> its replica's current entry
        self._replicas: dict[int, Replica] = {}  # order -> replica
        self._order: dict[Replica, int] = {}  # replica -> order
        self._joined = 0

    def __len__(self) -> int:
        return len(self._order)

    def join(self, replica: Replica) -> None:
        order = self._joined
        self._joined += 1
        self._order[replica], self._replicas[order] = order, replica
        self._push((self._load(replica), order))

    def leave(self, replica: Replica) -> None:
        order = self._order.pop(replica)
        del self._replicas[order], self._current[order]

    def update(self, replica: Replica) -> None:
        order = self._order.get(replica)
        if order is None:  # starting or draining: read when it joins
            return
        load = self._load(replica)
        if load != self._current[order][0]:
            self._push((load, order))

    def first(self) -> Replica:
        heap, current = self._heap, self._current
        while heap and current.get(heap[0][1]) is not heap[0]:
            heapq.heappop(heap)
        if not heap:
            raise ValueError("no replica is serving; expected at least one to route a request to")
        return self._replicas[heap[0][1]]

    def _push(self, entry: tuple[Any, int]) -> None:
        self._current[entry[1]] = entry
        heapq.heappush(self._heap, entry)
        if len(self._heap) > 2 * len(self._current) + 8:
            self._heap = list(self._current.values())
            heapq.heapify(self._heap)


class Router:
    def __init__(self, policy: str, seed: int = 0):
        choosers = {
            "round_robin": self._round_robin,
            "least_outstanding": self._least_loaded,
            "least_kv": self._least_loaded,
            "power_of_two": self._power_of_two,
            "prefix_affinity": self._prefix_affinity,
        }
        if policy not in choosers:
            raise ValueError(
                f"router policy {policy!r} is unknown; expected one of {sorted(choosers)}"
            )
        self.policy = policy
        self.choose = choosers[policy]
        self._next = 0
        self._rng = random.Random(seed)
        self.index = LoadIndex(LOADS[policy]) if policy in LOADS else None

    # ---- what the cluster and the replicas tell a router that keeps an index --------------------------
    def enlist(self, replica: Replica) -> None:
        """`replica` was appended to the serving list."""
        if self.index is not None:
            self.index.join(replica)

    def retire(self, replica: Replica) -> None:
        """`replica` was removed from the serving list."""
        if self.index is not None:
            self.index.leave(replica)

    def observe(self, replica: Replica) -> None:
        """`replica`'s load may have changed (a request added, aborted or finished; a step done)."""
        if self.index is not None:
            self.index.update(replica)

    def _round_robin(self, replicas: Sequence[Replica], request: Request) -> Replica:
        chosen = replicas[self._next % len(replicas)]
        self._next += 1
        return chosen

    def _least_loaded(self, replicas: Sequence[Replica], request: Request) -> Replica:
        assert len(replicas) == len(self.index), "the serving list changed without enlist / retire"
        return self.index.first()

    def _power_of_two(self, replicas: Sequence[Replica], request: Request) -> Replica:
        if len(replicas) == 1:
            return replicas[0]
        first, second = self._rng.sample(range(len(replicas)), 2)
        a, b = replicas[first], replicas[second]
        return a if a.num_outstanding <= b.num_outstanding else b

    @staticmethod
    def _prefix_affinity(replicas: Sequence[Replica], request: Request) -> Replica:
        def score(replica: Replica) -> tuple[int, int]:
            cached = len(replica.scheduler.block_manager.get_computed_blocks(request))
            return -cached, replica.num_outstanding

        return min(replicas, key=score)
