"""Replicas behind one router, as the autoscaler and the metrics read them: which serve (`serving`),
how many are still starting (`num_starting`), a new one enlisted with the router once its cold start
ends, and a drained one retired from it. One base for the cluster (`Cluster`) and for each pool of a
disaggregated one (`disaggregated.Pool`), so the two keep one rule.
"""

from __future__ import annotations

import simpy

from simulator.cluster.replica import DRAINING, SERVING, STOPPED, Replica
from simulator.cluster.router import Router


class ServingSet:
    env: simpy.Environment
    router: Router
    replicas: list[Replica]  # every replica ever added, stopped ones included
    serving: list[Replica]  # those the router may pick

    def _enlist_when_serving(self, replica: Replica) -> None:
        """Enlist a new replica with the router now if it serves, else once its cold start ends."""
        if replica.state == SERVING:
            self._enlist(replica)
        else:
            self.env.process(self._enlist_when_ready(replica))

    def _enlist_when_ready(self, replica: Replica):
        yield self.env.timeout(replica.ready_at_s - self.env.now)
        if replica.state == SERVING:
            self._enlist(replica)

    def _enlist(self, replica: Replica) -> None:
        self.serving.append(replica)
        self.router.enlist(replica)

    def drain_replica(self, replica: Replica) -> None:
        if replica in self.serving:
            self.serving.remove(replica)
            self.router.retire(replica)
        replica.drain()

    @property
    def num_starting(self) -> int:
        return sum(
            r.state not in (STOPPED, DRAINING) and r not in self.serving for r in self.replicas
        )
