"""Two claims about a full KV pool, simulated on one Llama-2-7B A100 replica with 10-second clients:

- long-context requests on a full pool: a replica busy with conversation traffic receives a burst of
  long requests (near `max_model_len`, as their own tenant, a `traffic.parts` entry). Paged KV with
  continuous batching allocates blocks as tokens come and, when the pool runs out, preempts the newest
  request and recomputes it later; the static server reserves `max_model_len` of contiguous KV per
  request up front, so it never runs out mid-request (no OOM) but admits only what it can reserve: the
  rest waits, and a client that sees no first token within 10 s gives up. That wait-or-time-out is the
  traditional server's analogue of the article's OOM. Read per tenant: preemptions, P99 TTFT / E2E and
  abandon rate of the conversation requests, and how many long requests complete.
- multi-tenant KV quotas under a spike: two tenants at the same steady rate, one of which spikes 10x;
  without quotas its flood fills the first-come-first-served queue and the pool, and the quiet tenant
  waits behind it; with `scheduler.tenant_block_quota` (each tenant at most half the pool) the quiet
  tenant's requests are admitted past the noisy tenant's. Read the quiet tenant's P99 TTFT and abandon
  rate with and without, and both tenants' summaries.

Each pair runs over the same seeds (same traffic for both sides); a ratio is the mean over seeds with
its 95% Student-t interval.
"""

from __future__ import annotations

import statistics

from simulator.planner.claims_base import all_at_once, base, interval, job
from simulator.planner.outcome import TENANT_KEYS, Outcome, OutcomeSummary
from simulator.resolve import resolve_pool
from simulator.scenario import Scenario

CONVERSATION, LONG = "conversation", "long-context"
QUIET, NOISY = "quiet", "noisy"
CLIENT_TIMEOUT_S = 10.0  # the article's 10-second spinner
# Long-context requests: prompt + output up to 4,084 of Llama-2-7B's 4,096 tokens.
LONG_PROMPT = {"kind": "uniform", "low": 3072, "high": 3584}
LONG_OUTPUT = {"kind": "uniform", "low": 256, "high": 500}


def _with_clients(scenario: Scenario, **scheduler) -> Scenario:
    updates = {"clients": scenario.clients.model_copy(update={"ttft_timeout_s": CLIENT_TIMEOUT_S})}
    if scheduler:
        updates["scheduler"] = scenario.scheduler.model_copy(update=scheduler)
    return scenario.model_copy(update=updates)


def long_context_scenario(
    policy: str,
    seed: int,
    rate_per_s: float,
    duration_s: float = 180.0,
    burst_requests: int = 32,
    burst_start_s: float = 60.0,
    burst_s: float = 8.0,
) -> Scenario:
    """Conversation traffic at `rate_per_s` for `duration_s`, and `burst_requests` long-context requests
    arriving evenly over `burst_s` from `burst_start_s`."""
    part = {
        "arrivals": {"kind": "constant", "rate_per_s": burst_requests / burst_s},
        "start_s": burst_start_s,
        "duration_s": burst_s,
        "prompt": LONG_PROMPT,
        "output": LONG_OUTPUT,
        "tenant": LONG,
    }
    traffic = {
        "arrivals": {"kind": "poisson", "rate_per_s": rate_per_s},
        "duration_s": duration_s,
        "tenants": {CONVERSATION: 1.0},
        "parts": [part],
    }
    return _with_clients(base(policy, seed, traffic, f"claims-long-context-{policy}"))


def quota_scenario(
    quotas: bool,
    seed: int,
    rate_per_s: float,
    duration_s: float = 240.0,
    spike_start_s: float = 60.0,
    spike_hold_s: float = 60.0,
    multiplier: float = 10.0,
) -> Scenario:
    """Two tenants at `rate_per_s` each; the noisy one's rate rises `multiplier`x (10 s ramps) for
    `spike_hold_s`. With `quotas`, each tenant may hold at most half the replica's KV pool."""
    spike = {
        "kind": "spike",
        "base": {"kind": "poisson", "rate_per_s": rate_per_s},
        "multiplier": multiplier,
        "start_s": spike_start_s,
        "ramp_up_s": 10.0,
        "hold_s": spike_hold_s,
        "ramp_down_s": 10.0,
    }
    traffic = {
        "arrivals": {"kind": "poisson", "rate_per_s": rate_per_s},
        "duration_s": duration_s,
        "tenants": {QUIET: 1.0},
        "parts": [{"arrivals": spike, "duration_s": duration_s, "tenant": NOISY}],
    }
    scenario = base("continuous", seed, traffic, f"claims-quota-{'on' if quotas else 'off'}")
    if not quotas:
        return _with_clients(scenario)
    pool = resolve_pool(scenario, scenario.model.spec())
    return _with_clients(scenario, tenant_block_quota={QUIET: pool // 2, NOISY: pool // 2})


def pool_searches(
    seeds: int, conversation_rate_per_s: float, tenant_rate_per_s: float
) -> tuple[dict, dict]:
    """({name: search} for `search.drive`, {name: the scenarios' keys in order}): both claims, `seeds` seeds each."""
    long_keys = [(policy, seed) for policy in ("continuous", "static") for seed in range(seeds)]
    quota_keys = [(quotas, seed) for quotas in (False, True) for seed in range(seeds)]
    searches = {
        "long context": all_at_once(
            [
                job(
                    long_context_scenario(policy, seed, conversation_rate_per_s),
                    {"phase": "claims: long context"},
                )
                for policy, seed in long_keys
            ]
        ),
        "quotas": all_at_once(
            [
                job(quota_scenario(quotas, seed, tenant_rate_per_s), {"phase": "claims: quotas"})
                for quotas, seed in quota_keys
            ]
        ),
    }
    return searches, {"long context": long_keys, "quotas": quota_keys}


def _tenant(outcome: Outcome, tenant: str) -> OutcomeSummary:
    if outcome.status == "invalid":
        raise ValueError(f"claims: scenario {outcome.key[:12]} cannot run: {outcome.error}")
    return outcome.tenants[tenant]


def _rows_json(rows: list[OutcomeSummary]) -> list[dict]:
    return [row.as_dict(TENANT_KEYS) for row in rows]


def _mean(values: list[float | None]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def _s(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f} s"


def _share(values: tuple[float, float, float]) -> str:
    mean, low, high = values
    return f"{mean:.0%} (95% CI {max(low, 0.0):.0%}-{min(high, 1.0):.0%})"


def long_context_row(outcomes: dict, seeds: int, label: str) -> tuple[dict, dict]:
    """The row and its per-policy figures (means over seeds, shares with their 95% interval) from
    {(policy, seed): outcome}."""
    figures = {}
    for policy in ("continuous", "static"):
        runs = [outcomes[(policy, seed)] for seed in range(seeds)]
        short = [_tenant(run, CONVERSATION) for run in runs]
        long = [_tenant(run, LONG) for run in runs]
        figures[policy] = {
            "preemptions": _mean([run.summary.preemptions for run in runs]),
            "short_ttft_p99_s": _mean([s.ttft_p99_s for s in short]),
            "short_e2e_p99_s": _mean([s.e2e_p99_s for s in short]),
            "short_abandon_rate": interval([s.abandon_rate for s in short]),
            "long_completed_share": interval([s.completed / s.requests for s in long]),
            "long_requests": _mean([s.requests for s in long]),
            "tenants": {CONVERSATION: _rows_json(short), LONG: _rows_json(long)},
        }
    cont, stat = figures["continuous"], figures["static"]
    better = (
        cont["long_completed_share"][0] > stat["long_completed_share"][0]
        and cont["short_abandon_rate"][0] <= stat["short_abandon_rate"][0]
    )
    ours = (
        ("" if cont["preemptions"] > 0 else "NOT A TEST: the pool never ran out. ")
        + f"{cont['long_requests']:.0f} long requests (3,072-3,584 prompt + 256-500 output tokens) in 8 s onto "
        f"conversation traffic, {seeds} seeds. Paged + continuous: {cont['preemptions']:.1f} preemptions "
        f"(recompute) per run, {_share(cont['long_completed_share'])} of long requests complete; conversation "
        f"P99 TTFT {_s(cont['short_ttft_p99_s'])}, P99 E2E {_s(cont['short_e2e_p99_s'])}, "
        f"{_share(cont['short_abandon_rate'])} abandoned. Static (reserves 4,096 tokens each, never runs out "
        f"mid-request): {stat['preemptions']:.0f} preemptions, {_share(stat['long_completed_share'])} of long "
        f"requests complete; conversation P99 TTFT {_s(stat['short_ttft_p99_s'])}, P99 E2E "
        f"{_s(stat['short_e2e_p99_s'])}, {_share(stat['short_abandon_rate'])} abandoned (no first token within "
        f"{CLIENT_TIMEOUT_S:.0f} s: the traditional server's OOM analogue)"
    )
    row = {
        "claim": "long-context requests on a full pool (OOM vs preemption)",
        "article": "a traditional server runs out of KV memory (OOM) on long requests; paged KV preempts and "
        "recomputes, and every request completes",
        "ours": ours,
        "verdict": (
            "contradicts" if not better else "confirms" if cont["preemptions"] > 0 else "not tested"
        ),
        "label": label + f"; {CLIENT_TIMEOUT_S:.0f} s client timeout",
    }
    return row, figures


def quota_row(outcomes: dict, seeds: int, label: str) -> tuple[dict, dict]:
    """The row and its figures from {(quotas, seed): outcome}: the quiet tenant's P99 TTFT with / without
    quotas as a ratio with its 95% interval over seeds, both tenants' summaries per seed."""
    figures = {}
    for quotas in (False, True):
        runs = [outcomes[(quotas, seed)] for seed in range(seeds)]
        quiet = [_tenant(run, QUIET) for run in runs]
        noisy = [_tenant(run, NOISY) for run in runs]
        figures["with quotas" if quotas else "without quotas"] = {
            "quiet_ttft_p99_s": _mean([q.ttft_p99_s for q in quiet]),
            "quiet_abandon_rate": _mean([q.abandon_rate for q in quiet]),
            "noisy_ttft_p99_s": _mean([n.ttft_p99_s for n in noisy]),
            "noisy_abandon_rate": _mean([n.abandon_rate for n in noisy]),
            "noisy_preemptions": _mean([n.preemptions for n in noisy]),
            "tenants": {QUIET: _rows_json(quiet), NOISY: _rows_json(noisy)},
        }
    off, on = figures["without quotas"], figures["with quotas"]
    pairs = [
        (
            outcomes[(True, s)].tenants[QUIET].ttft_p99_s,
            outcomes[(False, s)].tenants[QUIET].ttft_p99_s,
        )
        for s in range(seeds)
    ]
    ratios = [with_q / without for with_q, without in pairs if with_q is not None and without]
    ratio = (
        interval(ratios) if ratios else (float("nan"),) * 3
    )  # nan: no seed had both P99s to compare
    figures["quiet_ttft_p99_ratio"] = ratio
    protected = ratio[2] < 1.0 and on["quiet_abandon_rate"] <= off["quiet_abandon_rate"]
    ours = (
        f"quiet tenant's P99 TTFT {_s(off['quiet_ttft_p99_s'])} without quotas -> {_s(on['quiet_ttft_p99_s'])} "
        f"with (ratio {ratio[0]:.2f}x, 95% CI {ratio[1]:.2f}-{ratio[2]:.2f}, {seeds} seeds), abandoned "
        f"{off['quiet_abandon_rate']:.1%} -> {on['quiet_abandon_rate']:.1%}; noisy tenant: P99 TTFT "
        f"{_s(off['noisy_ttft_p99_s'])} -> {_s(on['noisy_ttft_p99_s'])}, abandoned "
        f"{off['noisy_abandon_rate']:.1%} -> {on['noisy_abandon_rate']:.1%}, preemptions "
        f"{off['noisy_preemptions']:.0f} -> {on['noisy_preemptions']:.0f} per run (each tenant at most half "
        "the KV pool)"
    )
    row = {
        "claim": "multi-tenant KV quotas under a spike (one tenant 10x)",
        "article": "per-tenant KV quotas keep one tenant's spike from starving the others",
        "ours": ours,
        "verdict": "confirms" if protected else "contradicts",
        "label": label + f"; {CLIENT_TIMEOUT_S:.0f} s client timeout",
    }
    return row, figures
