"""A link whose bandwidth concurrent transfers share equally (processor sharing): the prefill side of a
disaggregated cluster, where one prefill replica's NICs (or NVLink ports) carry the KV of every request
it hands over, to whichever decode replicas, at once.

With n transfers in flight each moves at bandwidth / n; when one starts or ends the others' rates change.
So k equal transfers started together all end at k × bytes / bandwidth, and one of B bytes started
beside one of 3B ends at 2B / bandwidth, the other at 4B / bandwidth (the hand checks in
tests/test_simulator_disaggregation.py). The fluid model is exact between events: remaining bytes are
advanced at every start and end, and one timer stands for the next end (a stale timer is ignored).
"""

from __future__ import annotations

import simpy

_DONE_BYTES = 1e-3  # remaining bytes below this count as sent (float rounding of the fluid model)


class SharedLink:
    def __init__(self, env: simpy.Environment, bandwidth_bytes_per_s: float):
        if not bandwidth_bytes_per_s > 0:
            raise ValueError(
                f"link bandwidth {bandwidth_bytes_per_s!r} B/s; expected a positive number"
            )
        self.env = env
        self.bandwidth_bytes_per_s = bandwidth_bytes_per_s
        self._remaining: dict[simpy.Event, float] = {}  # each transfer in flight: bytes left
        self._last_s = env.now
        self._generation = 0  # the timer that is current; older ones are stale
        self.peak_concurrent = 0

    @property
    def in_flight(self) -> int:
        return len(self._remaining)

    def send(self, num_bytes: float) -> simpy.Event:
        """An event that fires when `num_bytes` have gone over the link, sharing it with the others."""
        if num_bytes < 0:
            raise ValueError(f"a transfer of {num_bytes!r} bytes; expected ≥ 0")
        done = self.env.event()
        if num_bytes <= _DONE_BYTES:
            return done.succeed()
        self._advance()
        self._remaining[done] = float(num_bytes)
        self.peak_concurrent = max(self.peak_concurrent, len(self._remaining))
        self._schedule()
        return done

    def _advance(self) -> None:
        elapsed_s = self.env.now - self._last_s
        self._last_s = self.env.now
        if elapsed_s > 0 and self._remaining:
            sent = elapsed_s * self.bandwidth_bytes_per_s / len(self._remaining)
            for event in self._remaining:
                self._remaining[event] -= sent

    def _schedule(self) -> None:
        self._generation += 1
        if not self._remaining:
            return
        target = min(self._remaining, key=self._remaining.__getitem__)
        first = max(self._remaining[target], 0.0)
        delay_s = first * len(self._remaining) / self.bandwidth_bytes_per_s
        generation = self._generation
        timer = self.env.timeout(delay_s)
        timer.callbacks.append(lambda _event: self._on_timer(generation, target))

    def _on_timer(self, generation: int, target: simpy.Event) -> None:
        if generation != self._generation:
            return
        self._advance()
        # the transfer the timer was set for ends now, whatever float rounding of the clock left of
        # it, and with it any within a nanosecond's bytes of it
        limit = max(self._remaining[target], 0.0) + max(
            _DONE_BYTES, self.bandwidth_bytes_per_s * 1e-9
        )
        for event in [e for e, left in self._remaining.items() if left <= limit]:
            del self._remaining[event]
            event.succeed()
        self._schedule()
