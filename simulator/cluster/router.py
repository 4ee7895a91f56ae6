"""Routers: which serving replica a new request goes to.

round_robin; least_outstanding (fewest waiting + running, as llm-d's load-aware scorer); least_kv
(lowest KV usage as of the last step); power_of_two (two replicas drawn at random, the less loaded
wins: Mitzenmacher's power of two choices); prefix_affinity (most of the prompt's leading blocks
already cached on the replica, ties by load: as llm-d's prefix-cache scorer).
"""
from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

from engine.core.request import Request

if TYPE_CHECKING:
    from simulator.cluster.replica import Replica


class Router:
    def __init__(self, policy: str, seed: int = 0):
        choosers = {"round_robin": self._round_robin, "least_outstanding": self._least_outstanding,
                    "least_kv": self._least_kv, "power_of_two": self._power_of_two,
                    "prefix_affinity": self._prefix_affinity}
        if policy not in choosers:
            raise ValueError(f"router policy {policy!r} is unknown; expected one of {sorted(choosers)}")
        self.policy = policy
        self.choose = choosers[policy]
        self._next = 0
        self._rng = random.Random(seed)

    def _round_robin(self, replicas: Sequence["Replica"], request: Request) -> "Replica":
        chosen = replicas[self._next % len(replicas)]
        self._next += 1
        return chosen

    @staticmethod
    def _least_outstanding(replicas: Sequence["Replica"], request: Request) -> "Replica":
        return min(replicas, key=lambda replica: replica.num_outstanding)

    @staticmethod
    def _least_kv(replicas: Sequence["Replica"], request: Request) -> "Replica":
        return min(replicas, key=lambda replica: (replica.kv_usage, replica.num_outstanding))

    def _power_of_two(self, replicas: Sequence["Replica"], request: Request) -> "Replica":
        if len(replicas) == 1:
            return replicas[0]
        first, second = self._rng.sample(range(len(replicas)), 2)
        a, b = replicas[first], replicas[second]
        return a if a.num_outstanding <= b.num_outstanding else b

    @staticmethod
    def _prefix_affinity(replicas: Sequence["Replica"], request: Request) -> "Replica":
        def score(replica: "Replica") -> tuple[int, int]:
            cached = len(replica.scheduler.block_manager.get_computed_blocks(request))
            return -cached, replica.num_outstanding
        return min(replicas, key=score)
