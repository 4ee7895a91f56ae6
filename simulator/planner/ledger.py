"""The ledger: every candidate the planner evaluated, in the order it asked, with its status and the
reason it was rejected (`slo_ttft`, `slo_tpot`, `timeouts`, `goodput`, `kv_capacity`, `does_not_fit`),
written as CSV and JSON so any answer can be traced back to the simulations behind it. `share` and
`share_replicas` say what each simulated: the whole fleet (empty), one replica's 1/N share, or a sample
of k replicas with their share (large fleets' confirmations)."""

from __future__ import annotations

import json
from pathlib import Path

from simulator.planner.outcome import Outcome
from simulator.result import write_csv

COLUMNS = (
    "search",
    "phase",
    "gpu",
    "tensor_parallel",
    "replicas",
    "share",
    "share_replicas",
    "max_num_seqs",
    "max_num_batched_tokens",
    "policy",
    "batch_controller",
    "warm_pool",
    "step_scale",
    "status",
    "reason",
    "reasons",
    "ttft_p99_s",
    "tpot_p99_s",
    "abandon_rate",
    "slo_attainment",
    "cost_per_hour_usd",
    "cost_per_request_usd",
    "gpu_hours",
    "requests",
    "early_stop_s",
    "cpu_s",
    "cached",
    "error",
    "key",
)


class Ledger:
    def __init__(self):
        self.rows: list[dict] = []

    def add(self, context: dict, job: dict | None, outcome: Outcome, cached: bool = False) -> dict:
        """One row: the context (phase, GPU, fleet, settings) and what the evaluation found."""
        summary = outcome.summary
        row = dict.fromkeys(COLUMNS)
        row.update({key: value for key, value in context.items() if key in row})
        row.update(
            {
                "share": outcome.share,
                "share_replicas": outcome.share_replicas if outcome.share else None,
                "step_scale": outcome.step_scale,
                "status": outcome.status,
                "reason": "" if outcome.status == "meets" else (outcome.binding or ""),
                "reasons": " ".join(outcome.reasons),
                "ttft_p99_s": summary.ttft_p99_s,
                "tpot_p99_s": summary.tpot_p99_s,
                "abandon_rate": summary.abandon_rate,
                "slo_attainment": summary.slo_attainment,
                "cost_per_request_usd": summary.cost_per_request_usd,
                "gpu_hours": summary.gpu_hours,
                "requests": summary.requests,
                "early_stop_s": outcome.early_stop_s,
                "cpu_s": outcome.cpu_s,
                "cached": cached,
                "error": outcome.error or "",
                "key": outcome.key,
            }
        )
        price = outcome.facts.get("price_usd_per_gpu_hour")
        if (
            price is not None
            and row["replicas"]
            and row["tensor_parallel"]
            and not row["warm_pool"]
        ):
            row["cost_per_hour_usd"] = price * row["replicas"] * row["tensor_parallel"]
        self.rows.append(row)
        return row

    def write(self, out_dir: str | Path) -> list[Path]:
        """ledger.csv and ledger.json in `out_dir`."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        json_path = out / "ledger.json"
        json_path.write_text(json.dumps(self.rows, indent=1))
        return [write_csv(out / "ledger.csv", self.rows), json_path]

    def counts(self) -> dict[str, int]:
        """Rows by status, and how many were answered from the cache."""
        counts: dict[str, int] = {}
        for row in self.rows:
            counts[row["status"]] = counts.get(row["status"], 0) + 1
        counts["cached"] = sum(bool(row["cached"]) for row in self.rows)
        return counts
