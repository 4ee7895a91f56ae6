"""The ledger: every candidate the planner evaluated, in the order it asked, with its status and the
reason it was rejected (`slo_ttft`, `slo_tpot`, `timeouts`, `goodput`, `kv_capacity`, `does_not_fit`),
written as CSV and JSON so any answer can be traced back to the simulations behind it. `share` and
`share_replicas` say what each simulated: the whole fleet (empty), one replica's 1/N share, or a sample
of k replicas with their share (large fleets' confirmations)."""
from __future__ import annotations

import json
from pathlib import Path

from simulator.result import _write_csv

COLUMNS = ("search", "phase", "gpu", "tensor_parallel", "replicas", "share", "share_replicas", "max_num_seqs",
           "max_num_batched_tokens", "policy", "batch_controller", "warm_pool", "step_scale", "status", "reason", "reasons",
           "ttft_p99_s", "tpot_p99_s", "abandon_rate", "slo_attainment", "cost_per_hour_usd",
           "cost_per_request_usd", "gpu_hours", "requests", "early_stop_s", "cpu_s", "cached", "error", "key")


class Ledger:
    def __init__(self):
        self.rows: list[dict] = []

    def add(self, context: dict, job: dict | None, outcome: dict, cached: bool = False) -> dict:
        """One row: the context (phase, GPU, fleet, settings) and what the evaluation found."""
        summary = outcome.get("summary", {})
        status = outcome["status"]
        row = dict.fromkeys(COLUMNS)
        row.update({key: value for key, value in context.items() if key in row})
        row.update({
            "share": outcome.get("share"), "share_replicas": outcome.get("share_replicas") if outcome.get("share") else None,
            "step_scale": outcome.get("step_scale", 1.0), "status": status,
            "reason": "" if status == "meets" else (outcome.get("binding") or ""),
            "reasons": " ".join(outcome.get("reasons", [])),
            "ttft_p99_s": summary.get("ttft_p99_s"), "tpot_p99_s": summary.get("tpot_p99_s"),
            "abandon_rate": summary.get("abandon_rate"), "slo_attainment": summary.get("slo_attainment"),
            "cost_per_request_usd": summary.get("cost_per_request_usd"), "gpu_hours": summary.get("gpu_hours"),
            "requests": summary.get("requests"), "early_stop_s": outcome.get("early_stop_s"),
            "cpu_s": outcome.get("cpu_s"), "cached": cached, "error": outcome.get("error") or "",
            "key": outcome.get("key", "")})
        price = outcome.get("facts", {}).get("price_usd_per_gpu_hour")
        if price is not None and row["replicas"] and row["tensor_parallel"] and not row["warm_pool"]:
            row["cost_per_hour_usd"] = price * row["replicas"] * row["tensor_parallel"]
        self.rows.append(row)
        return row

    def write(self, out_dir: str | Path) -> list[Path]:
        """ledger.csv and ledger.json in `out_dir`."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        json_path = out / "ledger.json"
        json_path.write_text(json.dumps(self.rows, indent=1))
        return [_write_csv(out / "ledger.csv", self.rows), json_path]

    def counts(self) -> dict[str, int]:
        """Rows by status, and how many were answered from the cache."""
        counts: dict[str, int] = {}
        for row in self.rows:
            counts[row["status"]] = counts.get(row["status"], 0) + 1
        counts["cached"] = sum(bool(row["cached"]) for row in self.rows)
        return counts
