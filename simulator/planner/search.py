"""The capacity search: the fewest replicas (and the batch settings) of one GPU type that hold the SLO.
Its fleets, jobs and answers are `simulator.planner.fleet`'s.

Meeting the SLO is monotone in the fleet size, so the search bisects on the replica count, from the
floor the cost model's throughput ceiling sets (`simulator.planner.ceiling`: no smaller fleet could
serve the busiest minute), looking first a quarter above it (or, for the comparisons, at the fixed
fleet's answer) before the top of the range. A fast
first pass simulates one replica's share of the traffic (every N-th request: with load-balanced
routing the N replicas of a fixed fleet are near independent, so the share costs 1/N of a full run)
to bracket the answer for the first batch setting of the grid; the others are tried at that answer
and one below it, and bisected further down only if they beat it. A full-fleet simulation then
confirms the answer (stepping up while it misses) and, unless told otherwise, checks that one replica
less misses (stepping down while it does not), so the answer is minimal in full-fleet terms.

A full-fleet run of N replicas costs about N share passes, so above `Fleet.sample_replicas` (256)
replicas a fixed fleet is confirmed on a representative sample: k = 256 replicas given the requests
whose index modulo N is below k, routed among them by the scenario's router. Under round robin that
is exactly the traffic those k replicas of the N-replica fleet receive (retries and rejections apart,
which the whole fleet would route on): at the article's scale (10,000 requests/s peak, 1,455 A100s)
the 64-replica sample's P99 TTFT equals that of replicas 0-63 in the full run to the last digit. What
a sample cannot give is the whole fleet's P99 exactly: near saturation replicas differ a lot (there,
per-replica P99 TTFT ranged from 0.5 s to 8 s), so a P99 over k of them scatters around the fleet's.
Measured there over 40 random subsets of the full run (fleet P99 2.11 s): standard deviation 0.52 s
with 64 replicas, 0.23 s with 256, 0.14 s with 512. A 256-replica sample costs about an eighth of the
full run (30 s against 235-285 s on 2 CPU cores); its answer there, 1,461, held in a full run (P99
TTFT 1.82 s), while 1,455, the 64-replica sample's answer, missed in full (2.11 s). So a sampled
answer is the fewest replicas whose sample meets the SLO, within that scatter of the fleet's own P99
(a few replicas in a thousand here), and says so (`checked_by`). Under load-aware routers the sample
balances over k replicas instead of N, which can only leave it less evenly loaded: a slightly
pessimistic check. Autoscaled fleets (replicas come and go) are always simulated whole.
A sampled answer is then run on its whole fleet (`_confirm_whole`): under round robin the fleet's
replicas are independent, so it is simulated in parts of 256 replicas spread over the workers and
merged into the whole run's outcome (`simulator.planner.parts`); it stands if it meets, and steps up
while it misses. At the article's scale that is ~5 sample runs more, in parallel.

The share pass's answer is a poor start for a sampled confirmation (one replica's P99 is optimistic
against the P99 over many, so the sample missed there and the search stepped up one sample run at a
time), so `_confirm_sampled` first searches a small sample (`Fleet.estimate_replicas`: 32 replicas, an
eighth of the cost) and starts the full sample's search where the small one crossed.

Searches are generators: they yield a list of (job, ledger context) pairs and receive the outcomes.
`drive` runs many at once, batching their pending jobs onto the backend each round, so independent
searches (GPU types, ± error, baselines) fill the worker processes. Each search's path depends only
on outcomes, never on timing, so any backend gives the same answer.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import replace
from typing import Any

from simulator.planner.bracket import Ahead, Pair, bisect, crossing
from simulator.planner.fleet import Answer, Batch, Fleet
from simulator.planner.outcome import Outcome

Search = Generator[list[Pair], list[dict], Any]


def drive(runner, searches: dict[str, Search], ledger=None) -> dict[str, Any]:
    """Run the searches together, each advancing as soon as its own jobs are done; returns each one's
    result by name. Ledger rows are added search by search, in the order each search asked."""
    results: dict[str, Any] = {}
    waiting: dict[str, tuple[list[Pair], list[tuple[str, bool]]]] = {}
    rows: dict[str, list[tuple[dict, dict, Outcome, bool]]] = {name: [] for name in searches}

    def advance(name: str, value) -> None:
        try:
            pairs = searches[name].send(value)
            while isinstance(pairs, Ahead):
                runner.ahead([job for job, _ in pairs])
                pairs = searches[name].send(None)
        except StopIteration as stop:
            results[name] = stop.value
            return
        waiting[name] = (pairs, [runner.submit(job) for job, _ in pairs])

    for name in list(searches):
        advance(name, None)
    while waiting:
        ready = [
            name for name, (_, keys) in waiting.items() if all(runner.ready(key) for key, _ in keys)
        ]
        if not ready:
            runner.wait([key for _, keys in waiting.values() for key, _ in keys])
            continue
        for name in ready:
            pairs, keys = waiting.pop(name)
            outcomes = [runner.outcome(key) for key, _ in keys]
            rows[name] += [
                (context, job, outcome, not started)
                for (job, context), (_, started), outcome in zip(pairs, keys, outcomes)
            ]
            advance(name, outcomes)
    if ledger is not None:
        for name in searches:
            for context, job, outcome, cached in rows[name]:
                ledger.add(context | {"search": name}, job, outcome, cached)
    return results


def fewest_replicas(
    fleet: Fleet,
    grid: list[Batch],
    fast_pass: bool = True,
    check_below: bool = True,
    confirm: bool = True,
    guess: int | None = None,
    likely_next: Callable[[Answer], list[Pair]] | None = None,
):
    """The search described above, for one GPU type; returns an `Answer` (with `confirm=False`, the share
    pass's answer, to be confirmed later by `confirm_answer`). The first bisection starts at the cost
    model's floor and looks first at `guess` (default: a quarter above the floor). `likely_next`: the
    first probes of what follows the answer (the plan's comparisons), given the share pass's answer:
    started ahead, beside its full-fleet confirmation (`Runner.ahead`)."""
    share = fast_pass
    first = grid[0]
    floor = fleet.floor(first)
    found, seen = yield from bisect(
        lambda n: fleet.probe(n, first, share, "share pass" if share else "bisect"),
        fleet.low,
        fleet.high,
        floor=floor,
        guess=fleet.guess(first) if guess is None else max(guess, floor),
    )
    if (
        found is None and share
    ):  # the share pass can be pessimistic: ask the whole fleet before giving up
        top = (yield [fleet.probe(fleet.high, first, False, "confirm")])[0]
        if not top.meets:
            return Answer(
                None, first, top, grid=[_grid_row(first, fleet.high, top)], high=fleet.high
            )
        found, seen = fleet.high, {fleet.high: top}
        share = False
    best, best_batch, best_seen = found, first, seen
    rows = [_grid_row(first, found, seen[found])]
    others = grid[1:] if found > fleet.low else []
    if others:  # can another setting do with one replica less? (misses end early: cheap)
        below = yield [fleet.probe(found - 1, batch, share, "batch grid") for batch in others]
        for batch, outcome in zip(others, below):
            rows.append(_grid_row(batch, found - 1, outcome))
            if outcome.meets:
                n, more = yield from bisect(
                    lambda k, b=batch: fleet.probe(k, b, share, "batch grid"),
                    fleet.low,
                    found - 1,
                    high_known=outcome,
                    floor=fleet.floor(batch),
                )
                if n < best:
                    best, best_batch, best_seen = n, batch, more
    if not share:  # the search ran on full fleets already
        below = best_seen.get(best - 1)
        return Answer(best, best_batch, best_seen[best], below, below is not None, rows, fleet.high)
    if not confirm:
        return Answer(
            best,
            best_batch,
            best_seen[best],
            best_seen.get(best - 1),
            False,
            rows,
            fleet.high,
            False,
        )
    if likely_next is not None:  # what follows the answer, started beside its confirmation
        provisional = Answer(best, best_batch, best_seen[best], confirmed=False, high=fleet.high)
        yield Ahead(likely_next(provisional))
    return (
        yield from _confirm(fleet, best, best_batch, best_seen.get(best - 1), check_below, rows)
    )


def confirm_answer(fleet: Fleet, answer: Answer, check_below: bool = True):
    """A share-pass answer confirmed on full fleets (see `_confirm`)."""
    if answer.confirmed or answer.replicas is None:
        return answer
    return (
        yield from _confirm(
            fleet, answer.replicas, answer.batch, answer.below, check_below, answer.grid
        )
    )


def _confirm(
    fleet: Fleet,
    n: int,
    batch: Batch,
    share_below: Outcome | None,
    check_below: bool,
    rows: list[dict],
):
    """Full-fleet confirmation of the share pass's `n`: while it misses, gallop up (+1, +2, +4, ...) and bisect
    back; then, if asked, step down while one replica less still meets."""
    if fleet.sample_replicas is not None and n > fleet.sample_replicas:
        return (yield from _confirm_sampled(fleet, n, batch, check_below, rows))
    probe = lambda k: fleet.probe(k, batch, False, "confirm")  # noqa: E731
    if check_below and n > fleet.low:  # asked for next unless `n` misses: run it beside `n`
        yield Ahead([fleet.probe(n - 1, batch, False, "one fewer")])
    outcome = (yield [probe(n)])[0]
    below, below_full = share_below, False
    if not outcome.meets:
        failing, step, seen = n, 1, {n: outcome}
        while True:
            if failing >= fleet.high:
                return Answer(None, batch, outcome, grid=rows, high=fleet.high)
            top = min(failing + step, fleet.high)
            outcome = seen[top] = (yield [probe(top)])[0]
            if outcome.meets:
                break
            failing, step = top, step * 2
        n, more = yield from bisect(probe, failing + 1, top, high_known=outcome)
        seen |= more
        return Answer(n, batch, seen[n], seen[n - 1], True, rows, fleet.high)
    if check_below:
        while n > fleet.low:
            fewer = (yield [fleet.probe(n - 1, batch, False, "one fewer")])[0]
            if not fewer.meets:
                below, below_full = fewer, True
                break
            n, outcome, below = n - 1, fewer, None
        else:
            below, below_full = None, False
    return Answer(n, batch, outcome, below, below_full, rows, fleet.high)


def _confirm_sampled(fleet: Fleet, n: int, batch: Batch, check_below: bool, rows: list[dict]):
    """`_confirm` for a fleet confirmed on a sample (more than `sample_replicas`): the share pass's `n`
    is a poor start there (one replica's P99 is optimistic against the P99 over a sample's many, and
    each sample run costs ~`sample_replicas` share passes), so a small sample (`estimate_replicas`,
    1/8 the cost) is searched first, galloping from `n` by ~1% of it and cutting the bracket in three
    (two runs at a time) to within ~0.4% (its own scatter against the full sample's is larger); the
    full sample then looks for its own crossing (meets, one less misses) from there, galloping by one.
    Each size samples other requests, so near the boundary the verdict is noisy and the answer is a
    crossing near the estimate, within the sample's scatter (see the module docstring). A P99 over
    fewer replicas runs low (the share pass's answer, 1,265 A100s at the article's scale, against the
    full sample's 1,353; the small sample's, 1,352), so both searches start the first size up beside
    their first probe."""
    small = fleet.estimate_replicas
    start = n
    if small is not None and 1 < small < fleet.sample_replicas:
        estimate, _ = yield from crossing(
            lambda k: fleet.probe(k, batch, False, "sample estimate", sample=small),
            n,
            fleet.sample_replicas + 1,
            fleet.high,
            step=max(1, n // 100),
            tolerance=max(1, n // 256),
            expect_up=True,
            two_at_once=True,
        )
        start = estimate if estimate is not None else fleet.high
    found, seen = yield from crossing(
        lambda k: fleet.probe(k, batch, False, "confirm" if k >= start else "one fewer"),
        start,
        fleet.low,
        fleet.high,
        downward=check_below,
        expect_up=small is not None,
    )
    if found is None:
        return Answer(None, batch, seen[fleet.high], grid=rows, high=fleet.high)
    below = seen.get(found - 1)
    answer = Answer(found, batch, seen[found], below, below is not None, rows, fleet.high)
    if fleet.whole_fleet:
        return (yield from _confirm_whole(fleet, answer))
    return answer


def _confirm_whole(fleet: Fleet, answer: Answer):
    """A sampled answer run on its whole fleet, in parts (`Fleet.whole`): it stands if it meets; while
    it misses (the sample was optimistic), up by ~1% of it (the samples' scatter, module docstring)
    until it meets. The one-fewer verdict stays the sample's unless the answer moved (then unknown).
    Where the fleet's replicas are not independent (`parts_refusal`), the sample's answer as it was."""
    n, step = answer.replicas, max(1, answer.replicas // 100)
    while True:
        pair = fleet.whole(n, answer.batch)
        if pair is None:
            return answer
        outcome = (yield [pair])[0]
        if outcome.status == "invalid":  # cannot happen where the sample ran; keep the sample's
            return answer
        if outcome.meets:
            break
        if n >= fleet.high:
            return Answer(None, answer.batch, outcome, grid=answer.grid, high=fleet.high)
        n = min(n + step, fleet.high)
    if n == answer.replicas:
        return replace(answer, outcome=outcome)
    return replace(answer, replicas=n, outcome=outcome, below=None, below_is_full=False)


def simulated_replicas(outcome: Outcome, replicas: int) -> int:
    """How many replicas the outcome's simulation ran for a fleet of `replicas`: all of them, one (a share
    pass) or a sample."""
    return replicas if outcome.share is None else outcome.share_replicas


def checked_by(outcome: Outcome) -> str:
    """What an outcome's simulation covered, in words, for the plan's answer."""
    share, sample = outcome.share, outcome.share_replicas
    if share is None:
        return "full fleet"
    if sample > 1:
        return f"full fleet, sampled: {sample} of the {share} replicas with their round-robin share of the traffic"
    return "share pass (one replica's share of the traffic)"


def _grid_row(batch: Batch, replicas: int | None, outcome: Outcome) -> dict:
    """`worst_ratio`: the largest SLO ratio (observed / allowed): the smaller, the more headroom."""
    return {
        "max_num_seqs": batch.max_num_seqs,
        "max_num_batched_tokens": batch.max_num_batched_tokens,
        "kv_cache_dtype": batch.kv_cache_dtype,
        "replicas": replicas,
        "status": outcome.status,
        "reasons": outcome.reasons,
        "worst_ratio": outcome.worst_ratio,
    }
