"""Splitwise's mixed pool (Patel et al., ISCA 2024, cluster-level scheduling; its simulator's
`MixedPoolScheduler`), for a disaggregated cluster (`simulator.cluster.disaggregated`).

Machines of the prompt (prefill) and token (decode) pools move to a mixed pool when their own pool
cannot take a request, run prefill and decode together there (mixed batching, the one scheduler's
co-located steps), and go back to their pool once they run empty. As Splitwise decides:

- **A new request**: the prefill router's choice, unless its queue is long (requests wait there and
  its prompt tokens not yet computed, with this prompt's, exceed `max_pending_tokens`: Splitwise's
  `prompt_max_pending_batch_tokens`, 8192); then the prefill replica with the fewest such tokens,
  unless its queue is long too; then a decode replica already in the mixed pool whose queue is not
  long (fewest such tokens); else the decode replica with the fewest pending tokens moves to the mixed
  pool and takes it. Sent to a decode replica, the request is served there whole (the decode role's
  scheduler admits waiting requests like a co-located one): no KV transfer. When every machine is in
  the mixed pool or long, the least-pending of the prefill and mixed replicas takes it (Splitwise's
  fallback to mixed batching).
- **A hand-over** (a first token on a prefill replica): when no serving decode replica has room for the
  request's KV at its full length (used blocks, plus the blocks its queued hand-overs will take, plus
  this request's at prompt + max_tokens > its pool: Splitwise's `is_memory_loaded`), the prefill
  replica moves to the mixed pool and decodes the request itself (`Scheduler.take_back`, no transfer).
  Splitwise moves the prompt machine with the least memory in use and ships the KV to it; here the one
  already holding the KV keeps it, and a prompt machine takes no hand-overs from another.
- **Back to its pool**: a machine leaves the mixed pool when it has no request left (Splitwise's
  `notify_free_instance`). A decode replica in the mixed pool keeps taking hand-overs meanwhile (it
  stays in the decode router; Splitwise looks at token machines before mixed ones).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.core.block_manager import blocks_for
from engine.core.kv_handoff import kv_tokens
from engine.core.request import Request

if TYPE_CHECKING:
    from simulator.cluster.disaggregated import Pool
    from simulator.cluster.replica import Replica


def pending_tokens(replica: Replica) -> int:
    """Tokens the replica has still to compute for its requests: whole prompts waiting, the rest of
    prompts being prefilled, one per decoding request (Splitwise's `sched_pending_tokens`)."""
    scheduler = replica.scheduler
    return sum(r.num_tokens - r.num_computed_tokens for r in scheduler.waiting) + sum(
        r.num_tokens - r.num_computed_tokens for r in scheduler.running
    )


class MixedPool:
    """Which machines are lent to the mixed pool, and the routing decisions that lend them."""

    def __init__(self, prefill: Pool, decode: Pool, max_pending_tokens: int):
        if max_pending_tokens < 1:
            raise ValueError(f"mixed_pool_max_pending_tokens is {max_pending_tokens}; expected ≥ 1")
        self.prefill, self.decode = prefill, decode
        self.max_pending_tokens = max_pending_tokens
        self.lent_decode: list[Replica] = []  # decode replicas taking new requests whole
        self.lent_prefill: set[Replica] = set()  # prefill replicas decoding what they prefilled
        self.whole_requests = 0  # requests sent whole to a decode replica
        self.kept_requests = 0  # requests decoded on their prefill replica
        self.moves = 0  # times a machine moved into the mixed pool

    def _long(self, replica: Replica, prompt_tokens: int) -> bool:
        """Splitwise's `is_queue_long`: requests wait there and the pending tokens would pass the limit."""
        return (
            bool(replica.scheduler.waiting)
            and pending_tokens(replica) + prompt_tokens > self.max_pending_tokens
        )

    def route(self, choice: Replica, prompt_tokens: int) -> Replica:
        """Where a new request of `prompt_tokens` goes, given the prefill router's `choice`."""
        if not self._long(choice, prompt_tokens):
            return choice
        best = min(self.prefill.serving, key=pending_tokens)
        if not self._long(best, prompt_tokens):
            return best
        lent = [r for r in self.lent_decode if r in self.decode.serving]
        if lent:
            mixed = min(lent, key=pending_tokens)
            if not self._long(mixed, prompt_tokens):
                return self._whole(mixed)
        candidates = [r for r in self.decode.serving if r not in self.lent_decode]
        if candidates:
            moved = min(candidates, key=pending_tokens)
            self.lent_decode.append(moved)
            self.moves += 1
            return self._whole(moved)
        fallback = min(self.prefill.serving + lent, key=pending_tokens)
        return self._whole(fallback) if fallback in lent else fallback

    def _whole(self, replica: Replica) -> Replica:
        self.whole_requests += 1
        return replica

    def keeps(self, source: Replica, request: Request) -> bool:
        """At `request`'s hand-over from `source`: True (and `source` joins the mixed pool) when no
        serving decode replica has room for its KV at its full length."""
        need = blocks_for(request.max_num_tokens, self.decode.config.cache_config.block_size)
        for replica in self.decode.serving:
            scheduler = replica.scheduler
            bm = scheduler.block_manager
            queued = sum(
                blocks_for(kv_tokens(r), bm.block_size) for r in scheduler.handoffs.incoming
            )
            if bm.num_used_blocks + queued + need <= bm.num_blocks:
                return False
        if source not in self.lent_prefill:
            self.lent_prefill.add(source)
            self.moves += 1
        self.kept_requests += 1
        return True

    def on_free(self, replica: Replica) -> None:
        """`replica` has no request left: back to its own pool."""
        if replica in self.lent_prefill:
            self.lent_prefill.discard(replica)
        elif replica in self.lent_decode:
            self.lent_decode.remove(replica)

    def summary(self) -> dict:
        return {
            "mixed_pool_whole_requests": self.whole_requests,
            "mixed_pool_kept_requests": self.kept_requests,
            "mixed_pool_moves": self.moves,
        }
