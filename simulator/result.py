"""What a simulation returns: per-request records (the replay client's record type), per-window time
series, the autoscaler's decisions, and a typed summary (`simulator.summary.SimSummary`) — the
same metrics a live replay summarises (`traces.replay_summary.flat_summary`), plus KV, SLO and cost
figures only a simulation knows — and the same request metrics per tenant, so a noisy tenant's
effect on a quiet one can be read off. `summarize` is the one place a summary is built."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from simulator.scenario import Scenario
from simulator.slo import SLO
from simulator.summary import RequestSummary, SimSummary
from traces.replay import RequestRecord

if TYPE_CHECKING:
    from simulator.cluster.cluster import Cluster


@dataclass
class SimResult:
    scenario: Scenario
    records: list[RequestRecord]
    timeseries: list[dict]
    summary: SimSummary
    facts: dict
    decisions: list[dict] = field(default_factory=list)
    replicas: list[dict] = field(default_factory=list)
    tenants: dict[str, RequestSummary] = field(
        default_factory=dict
    )  # tenant -> its requests' summary
    pools: dict[str, list[dict]] = field(
        default_factory=dict
    )  # disaggregated: pool -> its time series
    # how the run went on this machine (`cpu_s`, `wall_s`): kept out of `summary` and `facts`, which
    # are a pure function of the scenario and its seed (two runs give byte-identical JSON)
    run: dict = field(default_factory=dict)

    def write(self, out_dir: str | Path) -> list[Path]:
        """requests.csv, timeseries.csv (and timeseries-POOL.csv per pool of a disaggregated cluster),
        timeseries.json (with summary, facts, decisions) in `out_dir`."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        written = [
            write_csv(out / "requests.csv", [_request_row(r) for r in self.records]),
            write_csv(out / "timeseries.csv", self.timeseries),
        ]
        written += [
            write_csv(out / f"timeseries-{pool}.csv", rows) for pool, rows in self.pools.items()
        ]
        path = out / "timeseries.json"
        path.write_text(
            json.dumps(
                {
                    "summary": self.summary.as_dict(),
                    "facts": self.facts,
                    "decisions": self.decisions,
                    "replicas": self.replicas,
                    "tenants": {name: row.as_dict() for name, row in self.tenants.items()},
                    "timeseries": self.timeseries,
                    "pools": self.pools,
                    "run": self.run,
                    "scenario": self.scenario.model_dump(mode="json"),
                },
                indent=1,
            )
        )
        return written + [path]


def _request_row(record: RequestRecord) -> dict:
    row = record.as_dict()
    row.pop("itl_s", None)
    return row


def write_csv(path: Path, rows: list[dict]) -> Path:
    """Rows as CSV with the union of their keys as columns, in order of first appearance."""
    columns: list[str] = []
    for row in rows:
        columns += [key for key in row if key not in columns]
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


def tenant_summaries(
    records: list[RequestRecord], end_s: float, slo: SLO
) -> dict[str, RequestSummary]:
    """Per tenant, in order of first appearance: its requests' summary (as the run's, abandon rate and SLO
    attainment included), so one tenant's P99 TTFT or abandon rate is read without the others'."""
    by_tenant: dict[str, list[RequestRecord]] = {}
    for record in records:
        by_tenant.setdefault(record.tenant, []).append(record)
    return {tenant: RequestSummary.of(group, end_s, slo) for tenant, group in by_tenant.items()}


def summarize(scenario: Scenario, cluster: Cluster, end_s: float, facts: dict) -> SimResult:
    """The one builder of a `SimSummary` (and the result around it) from a cluster that has run."""
    records = cluster.records
    slo = scenario.slo
    ok = [r for r in records if r.ok]
    queries = sum(r.scheduler.block_manager.num_prefix_queries for r in cluster.replicas)
    hits = sum(r.scheduler.block_manager.num_prefix_hits for r in cluster.replicas)
    gpu_hours = cluster.gpu_hours(end_s)
    cost = cluster.cost_usd(end_s)  # a split fleet: each pool's GPU-hours at its GPU's price
    output_tokens = sum(r.output_tokens for r in ok)
    requests = RequestSummary.of(records, end_s, slo)
    summary = SimSummary(
        **requests.as_dict(),
        meets_slo=slo.verdict(requests),
        kv_utilization=cluster.monitor.kv_utilization,
        kv_usage_peak=max((row["kv_usage"] for row in cluster.monitor.rows), default=0.0),
        block_allocations=sum(r.scheduler.block_manager.num_allocations for r in cluster.replicas),
        prefix_hit_rate=hits / queries if queries else 0.0,
        replicas_peak=max(
            (row["replicas_serving"] + row["replicas_starting"] for row in cluster.monitor.rows),
            default=len(cluster.replicas),
        ),
        gpu_hours=gpu_hours,
        cost_usd=cost,
        cost_per_request_usd=cost / len(ok) if ok else None,
        cost_per_million_output_tokens_usd=cost / output_tokens * 1e6 if output_tokens else None,
        simulated_s=end_s,
        **_tier_hit_rates(cluster, queries, hits),
        **kv_transfer_summary(cluster),
    )
    replicas = [
        {
            "replica": r.replica_id,
            "requested_at_s": r.requested_at_s,
            "ready_at_s": r.ready_at_s,
            "stopped_at_s": r.stopped_at_s,
            "steps": r.num_steps,
            "busy_s": r.busy_s,
            "preemptions": r.scheduler.num_preemptions,
            **({"pool": r.pool} if hasattr(r, "pool") else {}),
        }
        for r in cluster.replicas
    ]
    pools = getattr(cluster, "pools", {})
    decisions = cluster.autoscaler.decisions if cluster.autoscaler is not None else []
    decisions += [
        decision | {"pool": name}
        for name, pool in pools.items()
        if pool.autoscaler is not None
        for decision in pool.autoscaler.decisions
    ]
    return SimResult(
        scenario,
        records,
        cluster.monitor.rows,
        summary,
        facts,
        decisions,
        replicas,
        tenant_summaries(records, end_s, slo),
        {name: pool.monitor.rows for name, pool in pools.items()},
    )


def _tier_hit_rates(cluster: Cluster, queries: int, hits: int) -> dict:
    """Prompt tokens served from each KV tier / looked up: the GPU prefix cache, host memory."""
    tiers = [r.scheduler.block_manager.host_tier for r in cluster.replicas]
    host = sum(tier.hit_tokens for tier in tiers if tier is not None)
    return {
        "prefix_hit_rate_gpu": (hits - host) / queries if queries else 0.0,
        "prefix_hit_rate_cpu": host / queries if queries else 0.0,
        "cpu_kv_loaded_blocks": sum(tier.num_hits for tier in tiers if tier is not None),
        "cpu_kv_stored_blocks": sum(tier.num_stores for tier in tiers if tier is not None),
    }


def kv_transfer_summary(cluster: Cluster) -> dict:
    """Prefill-to-decode KV transfers (disaggregated clusters; 0 and None when co-located): bytes moved,
    mean and P99 link time per transfer, mean wait for the decode replica's link, GPUs per pool; what the mixed pool did, when it is on."""
    sizes, times = getattr(cluster, "transfer_bytes", []), getattr(cluster, "transfer_s", [])
    waits = getattr(cluster, "transfer_wait_s", [])
    pools = getattr(cluster, "pools", {})
    mixed_pool = getattr(cluster, "mixed_pool", None)
    return {
        **(mixed_pool.summary() if mixed_pool is not None else {}),
        "kv_transfer_bytes": int(sum(sizes)),
        "kv_transfers": len(sizes),
        "kv_transfer_mean_s": float(np.mean(times)) if times else None,
        "kv_transfer_p99_s": float(np.percentile(times, 99)) if times else None,
        "kv_transfer_wait_mean_s": float(np.mean(waits)) if waits else None,
        **{
            f"{name}_gpus_peak": max(
                (row["replicas_serving"] + row["replicas_starting"] for row in pool.monitor.rows),
                default=pool.config.initial_replicas,
            )
            * pool.config.tensor_parallel
            for name, pool in pools.items()
        },
    }
