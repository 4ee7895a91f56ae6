"""`surgeplan validate --published`: simulated vs measured errors of published sets, summarised.

Every (run, metric) pair of a set (`published_sets`), replayed (`published_replay`), becomes a
`Row`: simulated vs measured. Runs are split into `fit` (what `profile_fit.fit_profile` tunes the
profile's host terms on) and `held_out` (never fitted on); the statistics are reported for each part
and GPU separately: median |error|, bias (geometric mean of simulated / measured) and the share of
rows within 10%. Apart from the replay because this only tabulates its results.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from simulator.calibration.engine_profile import EngineProfile
from simulator.calibration.profile_errors import TP_CLASSES
from simulator.validation.published_replay import source_profile
from simulator.validation.published_sets import METRICS, load_published
from simulator.validation.replay_workers import replay_runs


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
    tensor_parallel: int = 1

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


def replay(data: dict, profile: EngineProfile | str | None = None) -> list[Row]:
    rows = []
    profile = source_profile(data, profile)
    name = profile.name
    for run, simulated in zip(data["runs"], replay_runs(data, profile), strict=True):
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
                        int(run.get("tensor_parallel", 1)),
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


# issue 18's targets for held-out rows, per profile and GPU: median |error|, |bias - 1|, share within 10%
TARGET_MEDIAN, TARGET_BIAS, TARGET_WITHIN = 0.05, 0.03, 0.80


def meets_targets(entry: Stats) -> bool:
    return (
        entry.median_abs_error <= TARGET_MEDIAN
        and abs(entry.bias - 1.0) <= TARGET_BIAS
        and entry.within_10pct >= TARGET_WITHIN
    )


def pooled_summary(results: list[dict]) -> list[dict]:
    """The held-out rows of every replayed set (`validate_published` results) pooled per engine profile
    and GPU (and over every GPU), for every tensor-parallel degree ("all") and for one GPU ("TP1") and a
    tensor-parallel group ("TP>1") apart, with whether each meets the targets: the per-profile, per-GPU
    figures, whatever set the rows come from."""
    fields = Row.__dataclass_fields__
    rows = [
        Row(**{key: value for key, value in row.items() if key in fields})
        for result in results
        for row in result["rows"]
        if row["split"] == "held_out"
    ]
    classes = {"all": lambda tensor_parallel: True} | TP_CLASSES
    out = []
    for profile in sorted({row.profile for row in rows}):
        mine = [row for row in rows if row.profile == profile]
        for gpu in sorted({row.gpu for row in mine}) + ["all"]:
            for degree, member in classes.items():
                part = [
                    row for row in mine if gpu in ("all", row.gpu) and member(row.tensor_parallel)
                ]
                if part:
                    entry = stats(part)
                    out.append(
                        {"profile": profile, "gpu": gpu, "degree": degree}
                        | asdict(entry)
                        | {"meets_targets": meets_targets(entry)}
                    )
    return out


def format_summary(summary: list[dict]) -> str:
    lines = [
        "held out, every set pooled (targets: median |error| <= "
        f"{TARGET_MEDIAN:.0%}, bias within ±{TARGET_BIAS:.0%}, >= {TARGET_WITHIN:.0%} within 10%)",
        f"{'profile':<10} {'GPU':<10} {'degree':<6} {'rows':>4} {'median |err|':>12} {'bias':>7} "
        f"{'≤10%':>6}  targets",
    ]
    for entry in summary:
        lines.append(
            f"{entry['profile']:<10} {entry['gpu']:<10} {entry['degree']:<6} {entry['rows']:>4} "
            f"{entry['median_abs_error']:>12.1%} {entry['bias']:>7.3f} {entry['within_10pct']:>6.0%}  "
            + ("met" if entry["meets_targets"] else "missed")
        )
    return "\n".join(lines)


def grouped_stats(rows: list[Row], by_tensor_parallel: bool = False) -> list[dict]:
    """Statistics per (profile, GPU, split), plus each split over all GPUs; `by_tensor_parallel`:
    per (profile, GPU, split, tensor-parallel degree) instead, with the degree under
    "tensor_parallel" (what the planner's band reads for a plan at that degree)."""

    def degree(row: Row) -> int | None:
        return row.tensor_parallel if by_tensor_parallel else None

    keys = sorted({(row.profile, row.gpu, row.split, degree(row)) for row in rows})
    if not by_tensor_parallel:
        keys += sorted({(row.profile, "all", row.split, None) for row in rows})
    out = []
    for profile, gpu, split, tp in keys:
        part = [
            row
            for row in rows
            if (row.profile, row.split, degree(row)) == (profile, split, tp)
            and gpu in ("all", row.gpu)
        ]
        extra = {"tensor_parallel": tp} if by_tensor_parallel else {}
        out.append({"profile": profile, "gpu": gpu, "split": split} | extra | asdict(stats(part)))
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
        }
        | {"closed_loop": closed_loop_note(data)},
        "rows": [asdict(row) | {"error": row.error} for row in rows],
        "stats": grouped_stats(rows),
    }


def closed_loop_note(data: dict) -> str | None:
    """How a set's closed loop from a synchronised start is replayed (`burst_start_turns`,
    `bunched_turns`), in words, or None for any other set."""
    turns = data.get("burst_start_turns")
    if turns is None:
        return None
    bunched = data.get("bunched_turns", 1.0)
    how = data.get("bunched_turns_label", "the first turn alone, a lower bound")
    return (
        f"closed loop from a synchronised start: {bunched:g} of its {turns} turns replayed bunched "
        f"({how}), the rest staggered"
    )


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
    "TARGET_BIAS",
    "TARGET_MEDIAN",
    "TARGET_WITHIN",
    "closed_loop_note",
    "Row",
    "Stats",
    "format_summary",
    "format_table",
    "grouped_stats",
    "meets_targets",
    "pooled_summary",
    "replay",
    "stats",
    "validate_published",
]
