"""The claims report's rows from the simulations `claims.run_claims` ran: each claim's ratio as a mean
over seeds with its 95% interval (`_ratio`), our figure beside the article's band, the verdict, and
the latency-vs-load series the page draws."""

from __future__ import annotations

import math
import statistics

from simulator.planner.claims_base import interval, reason, verdict

LOADS = (0.05, 0.3, 0.6, 0.9, 1.2)
FLEET_RATE_PER_S = 10000.0


def _ratio(
    outcomes: dict, key: str, repeats: int, numerator: tuple, denominator: tuple
) -> tuple[float, float, float]:
    return interval(
        [
            getattr(outcomes[numerator + (s,)].summary, key)
            / getattr(outcomes[denominator + (s,)].summary, key)
            for s in range(repeats)
        ]
    )


def claims_rows(
    offline, sweep, spike, rate_cont, rate_static, static_rps, repeats, label, facts
) -> dict:
    rows, series = (
        [],
        {
            "loads": list(LOADS),
            "latency_ratio": [],
            "ttft_spread": {"continuous": [], "static": []},
        },
    )
    kv = {
        p: interval([offline[(p, s)].summary.kv_utilization for s in range(repeats)])
        for p in ("continuous", "static")
    }
    pool_tokens = facts["kv_blocks_per_replica"] * 16
    rows.append(
        {
            "claim": "KV memory utilisation, paged vs contiguous reservation",
            "article": "paged wastes little; contiguous reservation wastes most of the KV memory",
            "ours": f"paged {kv['continuous'][0]:.1%} vs reserved {kv['static'][0]:.1%} of reserved slots hold "
            f"tokens; max concurrency {pool_tokens // 4096} reserving max_model_len 4,096 vs "
            f"{pool_tokens // 1357} at the mean request (1,357 tokens)",
            "verdict": "confirms" if kv["continuous"][0] > 2 * kv["static"][0] else "contradicts",
            "label": label,
        }
    )
    throughput = _ratio(offline, "output_tokens_per_s", repeats, ("continuous",), ("static",))
    rows.append(
        {
            "claim": "throughput, continuous / static",
            "article": "2-4x",
            "ours": f"{throughput[0]:.2f}x (95% CI {throughput[1]:.2f}-{throughput[2]:.2f}, {repeats} seeds, offline)",
            "verdict": verdict(throughput[1], throughput[2], (2.0, 4.0), True),
            "reason": reason(throughput[1], throughput[2], (2.0, 4.0), True)
            + (
                "; likely causes: the simulated workload's lengths (Azure conversation, long prompts, short "
                "outputs) and the static policy's reservation (prompt + max_tokens, not max_model_len)"
                if throughput[1] < 2.0
                else ""
            ),
            "label": label,
        }
    )
    for load in LOADS:
        ratio = _ratio(sweep, "e2e_mean_s", repeats, (load, "continuous"), (load, "static"))
        series["latency_ratio"].append(ratio)
        for policy in ("continuous", "static"):
            spreads = [
                sweep[(load, policy, s)].summary.ttft_p99_s
                / sweep[(load, policy, s)].summary.ttft_p50_s
                for s in range(repeats)
            ]
            series["ttft_spread"][policy].append(statistics.fmean(spreads))
        if load in (0.05, 0.6, 1.2):
            low_load = load == 0.05
            rows.append(
                {
                    "claim": f"mean latency, continuous / static at {load:.0%} of static's capacity "
                    f"({load * static_rps:.2f} req/s)",
                    "article": "little advantage at very low load"
                    if low_load
                    else "about -50% (0.5x)",
                    "ours": f"{ratio[0]:.2f}x (95% CI {ratio[1]:.2f}-{ratio[2]:.2f}); TTFT P99/P50 "
                    f"{series['ttft_spread']['continuous'][-1]:.1f} vs {series['ttft_spread']['static'][-1]:.1f}",
                    "verdict": verdict(
                        ratio[1], ratio[2], band := (0.8, 1.2) if low_load else (0.4, 0.6)
                    ),
                    "reason": reason(ratio[1], ratio[2], band, False),
                    "label": label,
                }
            )
    cont, stat = spike["continuous"].summary, spike["static"].summary
    rows.append(
        {
            "claim": "10x spike on one replica (10 s client timeout)",
            "article": "queues, timeouts, preemptions",
            "ours": f"abandoned {cont.abandon_rate:.1%} vs {stat.abandon_rate:.1%}, P99 TTFT "
            f"{cont.ttft_p99_s or 0:.1f} s vs {stat.ttft_p99_s or 0:.1f} s, preemptions "
            f"{cont.preemptions} vs {stat.preemptions} (continuous vs static)",
            "verdict": "confirms" if cont.abandon_rate < stat.abandon_rate else "contradicts",
            "label": label,
        }
    )
    price = facts["price_usd_per_gpu_hour"]
    capacity = {
        p: statistics.fmean(offline[(p, s)].summary.throughput_rps for s in range(repeats))
        for p in ("continuous", "static")
    }
    by_throughput = {p: math.ceil(FLEET_RATE_PER_S / rate) for p, rate in capacity.items()}
    ratio = by_throughput["static"] / by_throughput["continuous"]
    rows.append(
        {
            "claim": "fleet for 10,000 req/s on A100s, static vs continuous, sized by throughput",
            "article": "100 -> 40-50 GPUs (2-2.5x fewer)",
            "ours": f"{by_throughput['static']:,} -> {by_throughput['continuous']:,} GPUs ({ratio:.2f}x fewer; each "
            f"replica's offline capacity {capacity['static']:.2f} vs {capacity['continuous']:.2f} req/s); "
            f"${by_throughput['static'] * price / 3600 / FLEET_RATE_PER_S:.6f} -> "
            f"${by_throughput['continuous'] * price / 3600 / FLEET_RATE_PER_S:.6f} per request",
            "verdict": verdict(ratio, ratio, (2.0, 2.5)),
            "reason": reason(ratio, ratio, (2.0, 2.5), True),
            "label": label
            + "; absolute GPU counts differ from the article's: its request lengths are unstated",
        }
    )
    rates = {"continuous": rate_cont, "static": rate_static}
    by_slo = {p: math.ceil(FLEET_RATE_PER_S / rate) if rate else None for p, rate in rates.items()}
    text = {
        p: f"{n:,}"
        if n
        else f"no fleet (one replica misses the SLO even at {0.01 * static_rps:.3f} req/s)"
        for p, n in by_slo.items()
    }
    rows.append(
        {
            "claim": "fleet for 10,000 req/s on A100s, static vs continuous, within the SLO "
            "(P99 TTFT 2 s, P99 TPOT 0.15 s)",
            "article": "100 -> 40-50 GPUs",
            "ours": f"static {text['static']} -> continuous {text['continuous']} GPUs "
            f"(per replica {rates['continuous'] or 0:.2f} req/s within the SLO with continuous batching; a "
            "static batch holds new requests until its longest output ends, so its P99 TTFT is that long)",
            "verdict": "above"
            if not rate_static or (by_slo["static"] / by_slo["continuous"] > 2.5)
            else verdict(
                by_slo["static"] / by_slo["continuous"],
                by_slo["static"] / by_slo["continuous"],
                (2.0, 2.5),
                True,
            ),
            "label": label,
        }
    )
    return {"rows": rows, "series": series, "static_capacity_rps": static_rps, "repeats": repeats}
