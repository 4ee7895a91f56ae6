"""Searches over a fleet size whose probes say meets / misses: `bisect` (the least meeting size of a
monotone predicate, from a floor and a guess) and `crossing` (a size that meets while one less misses,
found by galloping away from an estimate, then bisecting the bracket).

Both are generators, as the planner's searches are (`simulator.planner.search`): they yield a list of
(job, ledger context) pairs and receive the outcomes; `Ahead` marks pairs they will probably ask for
next, which the driver may start on idle workers. `crossing` is for a predicate that is monotone only
up to noise, such as a sampled fleet's verdict near its boundary (each size samples other requests):
bisecting from the bottom of the range would spend its probes far from the answer, while an estimate
close to it leaves a bracket of a few sizes.
"""

from __future__ import annotations

from collections.abc import Callable

Pair = tuple[dict, dict]  # (job, ledger context)


class Ahead(list):
    """Yielded by a search: pairs it will probably ask for next (`Runner.ahead` starts them on free
    workers); the search gets None back at once and asks for them as usual when it needs them."""


def bisect(
    probe: Callable[[int], Pair],
    low: int,
    high: int,
    high_known=None,
    floor: int | None = None,
    guess: int | None = None,
):
    """Fewest n in [low, high] whose probe meets, assuming monotone; (n or None, {n: outcome}).
    `floor`: no n below it meets (the cost model's throughput ceiling), so the bisection starts there;
    `guess`: a likely answer, probed before `high` (a meet there saves the probes above it)."""
    seen = {}
    failing = min(max(low, floor or low), high) - 1
    meeting = None
    if high_known is None and guess is not None and failing < guess < high:
        seen[guess] = outcome = (yield [probe(guess)])[0]
        if outcome.meets:
            meeting = guess
        else:
            failing = guess
    if meeting is None:
        top = high_known if high_known is not None else (yield [probe(high)])[0]
        seen[high] = top
        if not top.meets:
            return None, seen
        meeting = high
    while meeting - failing > 1:
        middle = (failing + meeting) // 2
        outcome = (yield [probe(middle)])[0]
        seen[middle] = outcome
        if outcome.meets:
            meeting = middle
        else:
            failing = middle
    return meeting, seen


def crossing(
    probe: Callable[[int], Pair],
    start: int,
    low: int,
    high: int,
    step: int = 1,
    downward: bool = True,
    tolerance: int = 1,
    expect_up: bool = False,
    two_at_once: bool = False,
):
    """A size n in [low, high] whose probe meets while n - 1's misses (or n = low), looked for from
    `start`: (n or None when `high` misses, {n: outcome}). If `start` misses, gallop up by `step`,
    2 `step`, 4 `step`, ... until a size meets; if it meets (and `downward`), gallop down the same way
    until one misses; then bisect the bracket. Without `downward` a meeting `start` is the answer.
    Beside `start` one more size is named ahead (`Ahead`): `start - 1` (asked next if `start` meets),
    or with `expect_up` (an estimate known to run low) the first size up.
    `tolerance` > 1: the bisection stops at a bracket that narrow and returns its meeting end (an
    estimate, not a crossing). `two_at_once` (probes cheap enough to spend some for fewer rounds on
    two workers): galloping up names the next gallop size ahead of each probe, and the bracket is cut
    in three by two probes asked together (a third as wide per round instead of half)."""
    start = min(max(start, low), high)
    if expect_up and start < high:
        yield Ahead([probe(min(high, start + step))])
    elif downward and start > low:
        yield Ahead([probe(start - 1)])
    seen = {start: (yield [probe(start)])[0]}
    failing = meeting = None
    if seen[start].meets:
        meeting = start
        while downward and failing is None and meeting > low:
            size = max(low, meeting - step)
            seen[size] = (yield [probe(size)])[0]
            if seen[size].meets:
                meeting = size
            else:
                failing = size
            step *= 2
        if failing is None:
            return meeting, seen
    else:
        failing = start
        while meeting is None:
            if failing >= high:
                return None, seen
            size = min(high, failing + step)
            if two_at_once and size < high:
                yield Ahead([probe(min(high, size + 2 * step))])
            seen[size] = (yield [probe(size)])[0]
            if seen[size].meets:
                meeting = size
            else:
                failing = size
            step *= 2
    while two_at_once and meeting - failing > max(tolerance, 2):
        width = meeting - failing
        lower, upper = failing + width // 3, failing + (2 * width) // 3
        seen[lower], seen[upper] = yield [probe(lower), probe(upper)]
        if seen[lower].meets:
            meeting = lower
        elif seen[upper].meets:
            failing, meeting = lower, upper
        else:
            failing = upper
    while meeting - failing > tolerance:
        middle = (failing + meeting) // 2
        seen[middle] = (yield [probe(middle)])[0]
        if seen[middle].meets:
            meeting = middle
        else:
            failing = middle
    return meeting, seen
