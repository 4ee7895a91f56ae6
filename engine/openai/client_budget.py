"""Each client's share of the bytes the server reads: one client (an API key from one peer address)
cannot keep the event loop busy receiving and parsing its bodies, whatever it sends or how many
connections it opens.

Receiving and parsing a body runs on the event loop and holds the interpreter lock, which the
engine thread needs between its tensor operations: a client sending 4 MiB bodies from four
connections as fast as the server took them slowed another client's completions 13-31x (issue 24),
though every one of those bodies was refused. So each client has a token bucket of body bytes
(`--client-body-bytes-per-s`, holding one second of it and at least one largest body), and every
request with a body spends max(its length, REQUEST_FLOOR_BYTES): small requests count too, or a
flood of tiny ones would cost the same. On the event loop a small request (refused or not) took
about 1.2 ms, and a body about 2.2 ms per MiB received (both measured under the abuse set), so a
request counts as 256 KiB: a client may send 64 requests a second at the default.
A request over its client's share waits until the bucket has paid for it, without being read (so
a client flooding from many connections only has them wait); when that wait would pass
MAX_WAIT_S, it waits MAX_WAIT_S and is answered 429 with Retry-After. Other clients keep their own
share: the budget never makes one client wait for another.

A client is the (API key, peer address) pair: the key alone would let one address's flood stall
every user of a shared key; the address alone, every client behind one proxy. The table of clients
is bounded (MAX_CLIENTS): those with a full bucket are forgotten first, and past the bound new
clients share one bucket."""

import time

from engine.openai.limits import TokenBucket

REQUEST_FLOOR_BYTES = 256 << 10
MAX_WAIT_S = 2.0
MAX_CLIENTS = 4096
OVERFLOW_CLIENT = ("(more clients than the table holds)", "")


class ClientBudget:
    """Per-client token buckets of body bytes; `reserve` says how long a request must wait."""

    def __init__(self, bytes_per_s: int, max_body_bytes: int, max_clients: int = MAX_CLIENTS):
        self.bytes_per_s, self.max_clients = bytes_per_s, max_clients
        # one second of the rate, and at least one largest body and its floor: any body can pass
        self.burst_s = max(1.0, (max_body_bytes + REQUEST_FLOOR_BYTES) / bytes_per_s)
        self._buckets: dict[tuple[str, str], TokenBucket] = {}

    @staticmethod
    def cost_bytes(body_bytes: int) -> int:
        return max(body_bytes, REQUEST_FLOOR_BYTES)

    def reserve(self, client: tuple[str, str], body_bytes: int, now: float | None = None) -> float:
        """Seconds the request must wait for its share (0: none), its cost then spent; or, when that
        wait would pass MAX_WAIT_S, the wait it would have had, nothing spent (answer 429)."""
        now = time.monotonic() if now is None else now
        bucket = self._bucket(client, now)
        cost = self.cost_bytes(body_bytes)
        bucket.wait_s(0, now)  # refills up to now
        wait_s = max(0.0, (cost - bucket.tokens) / self.bytes_per_s)
        if wait_s <= MAX_WAIT_S:
            bucket.take(cost)  # may go into debt: later requests of this client wait longer
        return wait_s

    def spend(self, client: tuple[str, str], extra_bytes: int) -> None:
        """Bytes read beyond what a request declared (a chunked body): spent after the fact."""
        if extra_bytes > 0:
            self._bucket(client, time.monotonic()).take(extra_bytes)

    def _bucket(self, client: tuple[str, str], now: float) -> TokenBucket:
        bucket = self._buckets.get(client)
        if bucket is not None:
            return bucket
        if len(self._buckets) >= self.max_clients:
            self._forget_idle(now)
        if len(self._buckets) >= self.max_clients:
            client = OVERFLOW_CLIENT
            if client in self._buckets:
                return self._buckets[client]
        bucket = self._buckets[client] = TokenBucket(self.bytes_per_s, self.burst_s, now)
        return bucket

    def _forget_idle(self, now: float) -> None:
        """Drops clients whose bucket has refilled: forgetting them changes nothing."""
        for client, bucket in list(self._buckets.items()):
            bucket.wait_s(0, now)
            if bucket.tokens >= bucket.capacity:
                del self._buckets[client]

    def __len__(self) -> int:
        return len(self._buckets)
