"""`surgeplan validate --published`: replay public measurements through the simulator.

A published set (`simulator/validation/published/*.json`, figures only, each run with its source file,
commit and date) holds runs of a real serving stack on a real GPU: bursts of requests with their
prompt and output lengths (or a fixed-length batch: `batch_size` requests of the same lengths), sent
at once (or at the run's `arrival_s`), or a closed loop (`num_requests` of fixed lengths, at most
`max_concurrency` in flight, each sent when one ends: benchmark_serving's `--max-concurrency`), and
the measured makespan, mean TTFT, mean E2E latency and/or mean TPOT. A run measured with its prompts
already in the server's prefix cache (`prefix_cached`: the same prompts served just before) is
replayed after a warm-up that puts them there. A set whose load generator opens its measured closed
loop with every client at once (`burst_start_turns` T: aiperf's concurrency mode) weighs that first
turn 1/T in the means (`replay_run`).
Each run is replayed on one simulated replica with the GPU's best shipped calibration and the set's
engine profile, and every (run, metric) pair becomes a row: simulated vs measured. Runs are split
into `fit` (what `profile_fit.fit_profile` tunes the profile's host terms on) and `held_out`
(never fitted on); the statistics are reported for each part and GPU separately: median |error|,
bias (geometric mean of simulated / measured) and the share of rows within 10%.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from simulator.calibration.engine_profile import (
    EngineProfile,
    load_profile,
)
from traces import Trace

if TYPE_CHECKING:
    from simulator.scenario import Scenario

PUBLISHED_DIR = Path(__file__).parent / "published"
METRICS = ("makespan_s", "ttft_mean_s", "e2e_mean_s", "tpot_mean_s")


@dataclass(frozen=True)
class Row:
    source: str
    run: str
    gpu: str
    split: str
    metric: str
    profile: str
    measured: float
    simulated: float

    @property
    def ratio(self) -> float:
        return self.simulated / self.measured

    @property
    def error(self) -> float:
        return self.ratio - 1.0


@dataclass(frozen=True)
class Stats:
    rows: int
    median_abs_error: float
    bias: float
    within_10pct: float


def published_names() -> list[str]:
    return sorted(path.stem for path in PUBLISHED_DIR.glob("*.json"))


def load_published(name_or_path: str | Path) -> dict:
    path = Path(name_or_path)
    if not (path.suffix == ".json" and path.exists()):
        path = PUBLISHED_DIR / f"{name_or_path}.json"
    if not path.exists():
        raise ValueError(
            f"published set {str(name_or_path)!r} is unknown; expected one of {published_names()} "
            "or a path to a JSON file"
        )
    data = json.loads(path.read_text())
    like = data.get("kernel_era_like")
    if like is not None and like not in published_names():
        raise ValueError(
            f"{path}: kernel_era_like is {like!r}; expected the name of a stored set whose era "
            f"this source shares, one of {published_names()}"
        )
    turns = data.get("burst_start_turns")
    if turns is not None and not (isinstance(turns, int) and turns >= 1):
        raise ValueError(
            f"{path}: burst_start_turns is {turns!r}; expected an integer >= 1 (the load "
            "generator's requests per client, its first turn sent at once)"
        )
    for index, run in enumerate(data.get("runs", [])):
        # a fixed-length batch (B requests of the same lengths), or a closed loop's requests
        count = run.get("batch_size", run.get("num_requests"))
        if count is not None:
            for key in ("prompt_tokens", "output_tokens"):
                if isinstance(run[key], int):
                    run[key] = [run[key]] * int(count)
        limit = run.get("max_concurrency")
        if limit is not None and not (
            isinstance(limit, int) and 1 <= limit <= len(run["prompt_tokens"])
        ):
            raise ValueError(
                f"{path}: runs[{index}] ({run.get('id')}) has max_concurrency {limit!r}; expected "
                f"an integer from 1 to its {len(run['prompt_tokens'])} requests"
            )
        if len(run["prompt_tokens"]) != len(run["output_tokens"]) or not run["prompt_tokens"]:
            raise ValueError(
                f"{path}: runs[{index}] ({run.get('id')}) has {len(run['prompt_tokens'])} prompt "
                f"and {len(run['output_tokens'])} output lengths; expected equal, non-zero counts"
            )
        if "ttft_s" in run and len(run["ttft_s"]) != len(run["prompt_tokens"]):
            raise ValueError(
                f"{path}: runs[{index}] ({run.get('id')}) has {len(run['ttft_s'])} ttft_s for "
                f"{len(run['prompt_tokens'])} requests; expected one recorded TTFT per request"
            )
        if any(not 0 <= i < len(run["prompt_tokens"]) for i in run.get("ttft_unrecorded", ())):
            raise ValueError(
                f"{path}: runs[{index}].ttft_unrecorded has an index outside the run's "
                f"{len(run['prompt_tokens'])} requests; expected request indices"
            )
        arrivals = np.asarray(run.get("arrival_s", [0.0] * len(run["prompt_tokens"])))
        if (
            len(arrivals) != len(run["prompt_tokens"])
            or np.any(np.diff(arrivals) < 0)
            or arrivals[0] < 0
        ):
            raise ValueError(
                f"{path}: runs[{index}] ({run.get('id')}) has arrival_s that are not one non-negative, "
                "non-decreasing time per request; expected seconds from the run's start"
            )
        settings = data.get("engine_settings", {}) | run.get("engine_settings", {})
        if run.get("prefix_cached") and not settings.get("enable_prefix_caching"):
            raise ValueError(
                f"{path}: runs[{index}] ({run.get('id')}) is prefix_cached but its engine settings do "
                "not enable prefix caching; expected enable_prefix_caching: true"
            )
        if run["split"] not in ("fit", "held_out"):
            raise ValueError(
                f"{path}: runs[{index}].split is {run['split']!r}; expected 'fit' or 'held_out'"
            )
        if data.get("held_out_only") and run["split"] != "held_out":
            raise ValueError(
                f"{path}: runs[{index}] ({run.get('id')}) is split {run['split']!r} in a held-out-only "
                "set; expected 'held_out' (an independent check is never fitted on)"
            )
    return data


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
            "hardware": {"gpu": run["gpu"], "tensor_parallel": run.get("tensor_parallel", 1)},
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
    drained, its first N sent together) weighs that first turn, replayed as N requests at once into
    an idle engine, 1/T in the means, and the desynchronised steady state (the staggered replay)
    (T - 1)/T: a lower bound of the burst's share, as it takes the later turns to be spread at once."""
    steady = _replay_means(data, run, profile)
    turns = data.get("burst_start_turns")
    if turns is None or not run.get("staggered_warmup"):
        return steady
    limit = int(run["max_concurrency"])
    burst = _replay_means(
        data,
        run
        | {
            "staggered_warmup": False,
            "num_requests": limit,
            "prompt_tokens": run["prompt_tokens"][:1] * limit,
            "output_tokens": run["output_tokens"][:1] * limit,
        },
        profile,
    )
    mixed = {
        key: (burst[key] + (turns - 1) * steady[key]) / turns
        for key in ("ttft_mean_s", "e2e_mean_s", "tpot_mean_s")
    }
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
    on) takes that set's."""
    chosen = (
        profile
        if isinstance(profile, EngineProfile)
        else load_profile(profile or data["engine_profile"])
    )
    return chosen.for_source(data["name"], data.get("kernel_era_like"))


def replay(data: dict, profile: EngineProfile | str | None = None) -> list[Row]:
    rows = []
    profile = source_profile(data, profile)
    name = profile.name
    for run in data["runs"]:
        simulated = replay_run(data, run, profile)
        for metric in METRICS:
            if metric in run["measured"]:
                rows.append(
                    Row(
                        data["name"],
                        run["id"],
                        run["gpu"],
                        run["split"],
                        metric,
                        name,
                        float(run["measured"][metric]),
                        simulated[metric],
                    )
                )
    return rows


def stats(rows: list[Row]) -> Stats | None:
    if not rows:
        return None
    errors = np.array([abs(row.error) for row in rows])
    log_ratios = np.array([math.log(row.ratio) for row in rows])
    return Stats(
        len(rows),
        float(np.median(errors)),
        float(math.exp(log_ratios.mean())),
        float(np.mean(errors <= 0.10)),
    )


def grouped_stats(rows: list[Row]) -> list[dict]:
    """Statistics per (profile, GPU, split), plus each split over all GPUs."""
    out = []
    keys = sorted({(row.profile, row.gpu, row.split) for row in rows}) + sorted(
        {(row.profile, "all", row.split) for row in rows}
    )
    for profile, gpu, split in keys:
        part = [
            row
            for row in rows
            if row.profile == profile and row.split == split and gpu in ("all", row.gpu)
        ]
        out.append({"profile": profile, "gpu": gpu, "split": split, **asdict(stats(part))})
    return out


def validate_published(name_or_path: str | Path, profile: str | None = None) -> dict:
    data = load_published(name_or_path)
    rows = replay(data, profile)
    return {
        "source": {
            key: data.get(key)
            for key in (
                "name",
                "description",
                "url",
                "licence",
                "retrieved",
                "engine_profile",
                "engine_version",
            )
        },
        "rows": [asdict(row) | {"error": row.error} for row in rows],
        "stats": grouped_stats(rows),
    }


def format_table(result: dict) -> str:
    lines = [
        f"{'run':<12} {'GPU':<10} {'split':<8} {'metric':<12} {'measured':>10} {'simulated':>10} {'error':>8}"
    ]
    for row in result["rows"]:
        lines.append(
            f"{row['run']:<12} {row['gpu']:<10} {row['split']:<8} {row['metric']:<12} "
            f"{row['measured']:>10.3f} {row['simulated']:>10.3f} {row['error']:>+8.1%}"
        )
    lines.append("")
    lines.append(
        f"{'profile':<10} {'GPU':<10} {'split':<8} {'rows':>4} {'median |err|':>12} {'bias':>7} {'≤10%':>6}"
    )
    for entry in result["stats"]:
        lines.append(
            f"{entry['profile']:<10} {entry['gpu']:<10} {entry['split']:<8} {entry['rows']:>4} "
            f"{entry['median_abs_error']:>12.1%} {entry['bias']:>7.3f} {entry['within_10pct']:>6.0%}"
        )
    return "\n".join(lines)


__all__ = [
    "METRICS",
    "Row",
    "Stats",
    "format_table",
    "grouped_stats",
    "load_published",
    "published_names",
    "replay",
    "replay_inputs",
    "replay_records",
    "stats",
    "validate_published",
]
