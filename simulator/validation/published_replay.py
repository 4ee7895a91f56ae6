"""Replaying one published run (`published_sets`) through the simulator: its simulated records and
means.

Each run is replayed on one simulated replica with the GPU's best shipped calibration and the set's
engine profile in the kernel era of the set's source (`source_profile`). A run measured with its
prompts already in the server's prefix cache (`prefix_cached`) is replayed after a warm-up that puts
them there; a closed loop's steady state (`staggered_warmup`) after warm-up requests at every stage
of their lives. A set whose load generator opens its measured closed loop with every client at once
(`burst_start_turns` T: aiperf's concurrency mode) weighs that first turn, and the turns after it
that stay bunched (`bunched_turns` B), B/T in the means (`replay_run`). Apart from the loading
(`published_sets`) and the error report (`published_report`) because this is the one part that runs
the simulator: benchmarks and tests probe it run by run.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from simulator.calibration.engine_profile import (
    EngineProfile,
    load_profile,
)
from traces import Trace

if TYPE_CHECKING:
    from simulator.scenario import Scenario

# the per-request means a closed loop's two replays are mixed on (`mix_turns`); the makespan is the
# steady state's
MIXED_METRICS = ("ttft_mean_s", "e2e_mean_s", "tpot_mean_s")


def _chains(prompt_tokens: np.ndarray, block_size: int) -> list[list[int]]:
    """Each prompt its own chain of block hashes (no prefix shared between requests)."""
    return [
        [index * 1_000_000 + block for block in range(-(-int(tokens) // block_size))]
        for index, tokens in enumerate(prompt_tokens)
    ]


def replay_inputs(
    data: dict, run: dict, profile: EngineProfile | str | None = None
) -> tuple[Scenario, Trace, EngineProfile | None, int, float]:
    """What `replay_records` simulates for one published run: (scenario, trace, the profile object
    to pass to `simulate` or None for the scenario's named one, the number of measured requests (the
    trace's last ones), and the time the measured part starts).

    A run marked `prefix_cached` was measured with its prompts already in the prefix cache (the same
    prompts served just before on the same server): each prompt is first sent once with one output
    token, and the measured burst arrives after that warm-up has finished; only it is measured."""
    from simulator.scenario import Scenario
    from simulator.simulation import simulate

    settings = data.get("engine_settings", {}) | run.get("engine_settings", {})
    profile = profile if profile is not None else data["engine_profile"]
    n = len(run["prompt_tokens"])
    scenario = Scenario.model_validate(
        {
            "name": f"{data['name']}/{run['id']}",
            "model": {
                "name": run["model"],
                "dtype": run.get("dtype", "float16"),
                "weight_dtype": run.get("weight_dtype", "auto"),
            },
            "hardware": {
                "gpu": run["gpu"],
                "tensor_parallel": run.get("tensor_parallel", 1),
                "fused_all_reduce_mb": run.get("fused_all_reduce_mb", {}),
                "graph_steps": run.get("graph_steps"),
            },
            "engine_profile": profile if isinstance(profile, str) else None,
            "scheduler": settings,
            "traffic": {"max_concurrency": run.get("max_concurrency")},
            "cluster": {"replicas": 1},
        }
    )
    prompts, outputs = np.asarray(run["prompt_tokens"]), np.asarray(run["output_tokens"])
    own = profile if isinstance(profile, EngineProfile) else None
    arrivals = np.asarray(run.get("arrival_s", np.zeros(n)), dtype=float)
    start_s, trace = 0.0, Trace(arrivals, prompts, outputs, name=run["id"])
    if run.get("staggered_warmup"):
        # a closed loop's steady state: the requests in flight at every stage of their lives, not in
        # lock-step; `limit` warm-up requests of the run's prompt length and 1/N, 2/N, ... N/N of
        # its output length go first (unmeasured), so the measured ones are sent as they end
        limit = int(run["max_concurrency"])
        warm_out = np.ceil(np.arange(1, limit + 1) * outputs[0] / limit).astype(int)
        trace = Trace(
            np.r_[np.zeros(limit), arrivals],
            np.r_[np.full(limit, prompts[0]), prompts],
            np.r_[warm_out, outputs],
            name=run["id"],
        )
    if run.get("prefix_cached"):
        block = scenario.scheduler.block_size
        chains = _chains(prompts, block)
        warm = Trace(np.zeros(n), prompts, np.ones(n), hash_ids=chains, hash_block_size=block)
        warm_records = simulate(scenario, trace=warm, profile=own).records
        start_s = max(r.arrival_s + r.e2e_s for r in warm_records) + 1.0
        trace = Trace(
            np.r_[np.zeros(n), start_s + arrivals],
            np.r_[prompts, prompts],
            np.r_[np.ones(n), outputs],
            hash_ids=chains + chains,
            hash_block_size=block,
            name=run["id"],
        )
    return scenario, trace, own, n, start_s


def replay_records(
    data: dict, run: dict, profile: EngineProfile | str | None = None
) -> tuple[list, float]:
    """The simulated records of one published run's measured requests, in the run's order, and the
    time its measured part started (all requests at t=0, or at the run's `arrival_s`; a
    `prefix_cached` run after its warm-up: `replay_inputs`)."""
    from simulator.simulation import simulate

    scenario, trace, own, n, start_s = replay_inputs(data, run, profile)
    result = simulate(scenario, trace=trace, profile=own)
    records = [record for record in result.records if record.ok and record.index >= len(trace) - n]
    if len(records) != n:
        raise ValueError(
            f"{run['id']}: {n - len(records)} of {n} requests did not complete in the simulation"
        )
    return sorted(records, key=lambda record: record.index), start_s


def replay_run(
    data: dict, run: dict, profile: EngineProfile | str | None = None
) -> dict[str, float]:
    """Simulated makespan, mean TTFT, mean E2E and mean TPOT (benchmark_serving's: per request,
    (E2E - TTFT) / (output tokens - 1), over requests of more than one output token) of one
    published run (`replay_records`).

    A set measured by a load generator that starts its closed loop with every client at once
    (`burst_start_turns` T: aiperf's concurrency mode runs T x N requests after its warm-up has
    drained, its first N sent together) mixes two replays (`closed_loop_parts`): the burst, N
    requests at once into an idle engine, weighed B/T, and the desynchronised steady state (the
    staggered replay) weighed (T - B)/T, where B is the set's `bunched_turns` (the turns that meet
    the loop still bunched; 1 unless the set's fit runs fitted it: `closed_loop_fit`)."""
    parts = closed_loop_parts(data, run, profile)
    if parts is None:
        return _replay_means(data, run, profile)
    burst, steady = parts
    return mix_turns(burst, steady, bunched_share(data))


def bunched_share(data: dict) -> float:
    """The share of a closed-loop set's measured requests replayed bunched: `bunched_turns` (1 by
    default: the burst turn alone) of its `burst_start_turns`."""
    return float(data.get("bunched_turns", 1.0)) / int(data["burst_start_turns"])


def closed_loop_parts(
    data: dict, run: dict, profile: EngineProfile | str | None = None
) -> tuple[dict[str, float], dict[str, float]] | None:
    """(the burst's means, the steady state's means) of a run of a set with `burst_start_turns`,
    or None for any other run: the two replays `replay_run` mixes, apart so that a fit of the mix
    (`closed_loop_fit`) simulates each run once."""
    if data.get("burst_start_turns") is None or not run.get("staggered_warmup"):
        return None
    limit = int(run["max_concurrency"])
    burst = _replay_means(
        data,
        run
        | {
            "staggered_warmup": False,
            "num_requests": limit,
            # the loop's first turn: its first `limit` requests, sent at once
            "prompt_tokens": run["prompt_tokens"][:limit],
            "output_tokens": run["output_tokens"][:limit],
        },
        profile,
    )
    return burst, _replay_means(data, run, profile)


def mix_turns(burst: dict[str, float], steady: dict[str, float], share: float) -> dict[str, float]:
    """The steady state's means with TTFT, E2E and TPOT mixed: `share` of them the burst's."""
    mixed = {key: share * burst[key] + (1.0 - share) * steady[key] for key in MIXED_METRICS}
    return steady | mixed


def _replay_means(
    data: dict, run: dict, profile: EngineProfile | str | None = None
) -> dict[str, float]:
    records, start_s = replay_records(data, run, profile)
    # requests whose TTFT the benchmark did not record (no text came back) are left out of the mean
    unrecorded = set(run.get("ttft_unrecorded", ()))
    tpots = [r.tpot_s for r in records if r.tpot_s is not None]  # (`RequestRecord.tpot_s`)
    return {
        "tpot_mean_s": float(np.mean(tpots)) if tpots else math.nan,
        "makespan_s": max(r.arrival_s + r.e2e_s for r in records) - start_s,
        "ttft_mean_s": float(
            np.mean([r.ttft_s for i, r in enumerate(records) if i not in unrecorded])
        ),
        "e2e_mean_s": float(np.mean([r.e2e_s for r in records])),
    }


def source_profile(data: dict, profile: EngineProfile | str | None = None) -> EngineProfile:
    """The profile (the set's own unless named) as this set's source ran it: its kernel era
    (`EngineProfile.source_eras`, chosen on the set's fit runs) applied; a set declared of the same
    stack generation as another (`kernel_era_like`: a held-out-only set has no fit runs to choose
    on) takes that set's; a set run offline (`api_server` false) pays no per-request API-server
    term."""
    chosen = (
        profile
        if isinstance(profile, EngineProfile)
        else load_profile(profile or data["engine_profile"])
    )
    chosen = chosen.for_source(data["name"], data.get("kernel_era_like"))
    return chosen if data["api_server"] else chosen.offline()


__all__ = [
    "MIXED_METRICS",
    "bunched_share",
    "closed_loop_parts",
    "mix_turns",
    "replay_inputs",
    "replay_records",
    "replay_run",
    "source_profile",
]
