"""The split planner's answer (`simulator.planner.split`): "would splitting prefill and decode, or adding
host memory for KV, hold this spike with fewer GPUs?", with the chosen fleet's ratio, cost and P99s."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from simulator.planner.split import Outcome


@dataclass(frozen=True)
class SplitAnswer:
    """ "Would splitting prefill and decode, or adding host memory for KV, hold this spike with fewer
    GPUs?", answered from the search: the cheapest fleet that holds the SLO (its layout, ratio, GPUs,
    cost and P99s) against the cheapest co-located fleet without a host tier (the baseline)."""

    recommendation: Outcome | None
    baseline: Outcome | None  # cheapest co-located fleet without a host tier that holds the SLO
    ratio: str | None  # "2P1D" for a split, "co-located" otherwise
    prefill_decode_gpus: tuple[int, int] | None  # GPUs in each pool of a split
    gpus_saved: int | None  # baseline GPUs - recommended GPUs (None: no baseline in range)
    cost_saved_usd: float | None
    split_saves_gpus: bool  # a split holds the SLO with fewer GPUs than the baseline
    host_tier_saves_gpus: bool  # a fleet with a host KV tier holds it with fewer GPUs
    mixed_pool: bool = False  # the recommended split runs Splitwise's mixed pool

    def row(self) -> dict:
        return {
            "recommendation": self.recommendation.row() if self.recommendation else None,
            "baseline": self.baseline.row() if self.baseline else None,
            **{
                key: getattr(self, key)
                for key in (
                    "ratio",
                    "prefill_decode_gpus",
                    "gpus_saved",
                    "cost_saved_usd",
                    "split_saves_gpus",
                    "host_tier_saves_gpus",
                    "mixed_pool",
                )
            },
        }

    def sentence(self) -> str:
        rec = self.recommendation
        if rec is None:
            return "No layout in range holds the SLO; raise --max-replicas or try more --tp."
        what = f"{rec.layout.label}: {rec.gpus} GPUs"
        if self.prefill_decode_gpus is not None:
            what += (
                f" ({self.prefill_decode_gpus[0]} prefill : {self.prefill_decode_gpus[1]} decode)"
            )
        what += (
            f", ${rec.cost_usd:.2f}, P99 TTFT {rec.ttft_p99_s or 0:.2f} s, "
            f"P99 TPOT {rec.tpot_p99_s or 0:.3f} s"
        )
        if self.baseline is None:
            return f"Cheapest fleet that holds the SLO: {what} (no co-located fleet in range holds it)."
        verdict = []
        verdict.append(
            "splitting prefill and decode "
            + ("holds it with fewer GPUs" if self.split_saves_gpus else "does not save GPUs")
        )
        verdict.append(
            "a host KV tier "
            + ("holds it with fewer GPUs" if self.host_tier_saves_gpus else "does not save GPUs")
        )
        base = self.baseline
        return (
            f"Cheapest fleet that holds the SLO: {what}; against co-located {base.gpus} GPUs "
            f"(${base.cost_usd:.2f}): {_saved(self.gpus_saved, self.cost_saved_usd)}; "
            + "; ".join(verdict)
            + "."
        )


def answer(best: dict[str, Outcome | None], price: Callable[[Outcome], tuple]) -> SplitAnswer:
    """The answer from the best fleet of each layout (None: none in range held the SLO), cheapest by
    `price` (the planner's: GPUs, then cost, then P99 TTFT)."""
    held = [outcome for outcome in best.values() if outcome is not None]
    rec = min(held, key=price, default=None)
    plain = [o for o in held if o.layout.kind == "colocated" and not o.layout.cpu_kv_gb]
    base = min(plain, key=price, default=None)

    def fewest(keep) -> int | None:
        gpus = [o.gpus for o in held if keep(o.layout)]
        return min(gpus) if gpus else None

    def saves(gpus: int | None) -> bool:
        return gpus is not None and base is not None and gpus < base.gpus

    split = rec is not None and rec.layout.kind == "disaggregated"
    return SplitAnswer(
        recommendation=rec,
        baseline=base,
        ratio=None
        if rec is None
        else (
            f"{rec.layout.prefill_replicas}P{rec.layout.decode_replicas}D"
            if split
            else "co-located"
        ),
        prefill_decode_gpus=(
            rec.layout.prefill_replicas * rec.layout.prefill_tensor_parallel,
            rec.layout.decode_replicas * rec.layout.decode_tensor_parallel,
        )
        if split
        else None,
        gpus_saved=None if rec is None or base is None else base.gpus - rec.gpus,
        cost_saved_usd=None if rec is None or base is None else base.cost_usd - rec.cost_usd,
        split_saves_gpus=saves(fewest(lambda layout: layout.kind == "disaggregated")),
        host_tier_saves_gpus=saves(fewest(lambda layout: layout.cpu_kv_gb > 0)),
        mixed_pool=split and rec.layout.mixed_pool,
    )


def _saved(gpus: int, usd: float) -> str:
    """ "4 GPUs and $3.75 saved"; a fleet of cheaper GPUs may save dollars with more of them."""
    if gpus >= 0:
        return f"{gpus} GPUs and ${usd:.2f} saved"
    return f"{-gpus} more GPUs but ${usd:.2f} saved"
