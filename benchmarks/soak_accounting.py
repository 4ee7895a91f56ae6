"""The soak's books: what the clients saw (one `Record` per request) against what the server counted in
/metrics over the same span (two snapshots), every identity that must hold between them, and the
figures table. A request counts as sent once its last byte was written; one cancelled before that
never reached the server and is only reported.

The identities, each exact unless said otherwise:
- every request sent got exactly one HTTP answer counted by the server (by route and status);
- for each status the server counted at least what clients saw, and the surplus over all statuses is
  the requests whose clients hung up before any status arrived;
- every request the engine accepted finished with a recorded reason (stop, length, or abort), and
  every abort has a recorded cause (disconnect, deadline, drain, step_error, shutdown);
- requests clients saw complete ≤ those the engine finished ≤ those + requests clients left;
- aborts for a deadline = 504s clients saw; aborts for a disconnect ≤ requests clients left;
- 429s = refusals counted per tenant and limit, and per tenant at least what clients saw;
- no 500, and no client saw anything the mix did not expect.
"""

import re
from collections import Counter

import numpy as np

from benchmarks.soak_traffic import TENANTS, Record

GENERATION_ROUTES = ("/v1/completions", "/v1/chat/completions")
ABORT_CAUSES_NEVER_EXPECTED = ("drain", "step_error", "shutdown")


class Snapshot:
    """/metrics text as samples keyed by name and labels."""

    def __init__(self, text: str):
        self.samples: list[tuple[str, dict, float]] = []
        for line in text.splitlines():
            match = re.match(r"^([^\s{#]+)(?:\{([^}]*)\})?\s+(\S+)$", line)
            if match:
                labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(2) or ""))
                self.samples.append((match.group(1), labels, float(match.group(3))))

    def total(self, name: str, **labels: str) -> float:
        return sum(
            v
            for n, found, v in self.samples
            if n == name and all(found.get(k) == x for k, x in labels.items())
        )

    def by(self, name: str, label: str, **labels: str) -> dict[str, float]:
        values: Counter = Counter()
        for n, found, v in self.samples:
            if n == name and label in found and all(found.get(k) == x for k, x in labels.items()):
                values[found[label]] += v
        return dict(values)


def _delta(after: dict[str, float], before: dict[str, float]) -> dict[str, int]:
    return {
        k: int(round(v - before.get(k, 0))) for k, v in after.items() if round(v - before.get(k, 0))
    }


def account(all_records: list[Record], before: Snapshot, after: Snapshot) -> tuple[dict, list[str]]:
    """(figures, problems): the books for the requests of `all_records`, sent between the two snapshots."""
    records = [r for r in all_records if r.delivered]
    unsent = [r for r in all_records if not r.delivered]
    server_status: Counter = Counter()
    for route in GENERATION_ROUTES:
        server_status.update(
            _delta(
                after.by("surgeplan:http_responses_total", "status", route=route),
                before.by("surgeplan:http_responses_total", "status", route=route),
            )
        )
    finished = _delta(
        after.by("vllm:request_success_total", "finished_reason"),
        before.by("vllm:request_success_total", "finished_reason"),
    )
    aborted = _delta(
        after.by("surgeplan:requests_aborted_total", "reason"),
        before.by("surgeplan:requests_aborted_total", "reason"),
    )
    rejected = _delta(
        after.by("surgeplan:requests_rejected_total", "reason"),
        before.by("surgeplan:requests_rejected_total", "reason"),
    )
    tenant_429 = {
        t: sum(
            _delta(
                after.by("surgeplan:tenant_requests_rejected_total", "limit", tenant=t),
                before.by("surgeplan:tenant_requests_rejected_total", "limit", tenant=t),
            ).values()
        )
        for t in TENANTS
    }
    limit_429 = _delta(
        after.by("surgeplan:tenant_requests_rejected_total", "limit"),
        before.by("surgeplan:tenant_requests_rejected_total", "limit"),
    )
    accepted = int(
        round(
            after.total("surgeplan:requests_accepted_total")
            - before.total("surgeplan:requests_accepted_total")
        )
    )

    outcomes = Counter(r.outcome for r in records)
    client_status = Counter(r.status for r in records if r.status is not None)
    left = outcomes["left"]
    left_before_status = sum(1 for r in records if r.outcome == "left" and r.status is None)
    completed = [r for r in records if r.outcome == "completed"]
    deadline_504 = sum(1 for r in records if r.status == 504 or r.error_code == 504)
    client_429 = Counter(r.tenant for r in records if r.status == 429)
    finished_ok = finished.get("stop", 0) + finished.get("length", 0)
    latencies = np.array([r.latency_s for r in completed]) if completed else np.zeros(1)

    problems = []

    def check(ok: bool, message: str) -> None:
        if not ok:
            problems.append(message)

    check(
        sum(server_status.values()) == len(records),
        f"the server answered {sum(server_status.values())} generation requests, clients sent {len(records)}",
    )
    for status in sorted(set(server_status) | {str(s) for s in client_status}):
        check(
            server_status.get(status, 0) >= client_status.get(int(status), 0),
            f"status {status}: the server counted {server_status.get(status, 0)}, clients saw "
            f"{client_status.get(int(status), 0)}",
        )
    surplus = sum(server_status.values()) - sum(client_status.values())
    check(
        surplus == left_before_status,
        f"the server answered {surplus} requests whose status no client saw, "
        f"but {left_before_status} clients hung up before a status",
    )
    check(
        accepted == sum(finished.values()),
        f"the engine accepted {accepted} requests and finished "
        f"{sum(finished.values())} ({finished}): some ended without a recorded reason",
    )
    check(
        finished.get("abort", 0) == sum(aborted.values()),
        f"{finished.get('abort', 0)} requests finished as abort but {sum(aborted.values())} aborts have a cause",
    )
    check(
        len(completed) <= finished_ok <= len(completed) + left,
        f"clients saw {len(completed)} complete and left "
        f"{left}, the engine finished {finished_ok} with stop or length",
    )
    check(
        aborted.get("deadline", 0) == deadline_504,
        f"{aborted.get('deadline', 0)} deadline aborts, clients saw {deadline_504} 504s",
    )
    check(
        aborted.get("disconnect", 0) <= left,
        f"{aborted.get('disconnect', 0)} disconnect aborts, clients left {left}",
    )
    for cause in ABORT_CAUSES_NEVER_EXPECTED:
        check(aborted.get(cause, 0) == 0, f"{aborted.get(cause)} requests aborted for {cause}")
    check(
        server_status.get("429", 0) == sum(tenant_429.values()),
        f"{server_status.get('429', 0)} 429s answered, {sum(tenant_429.values())} counted per tenant",
    )
    for tenant in TENANTS:
        check(
            tenant_429[tenant] >= client_429[tenant],
            f"tenant {tenant}: {tenant_429[tenant]} 429s counted, clients saw {client_429[tenant]}",
        )
    check(server_status.get("500", 0) == 0, f"{server_status.get('500')} answers were 500")
    check(
        all(r.outcome == "left" for r in unsent),
        f"{len(unsent)} requests were not written in full, not all "
        f"cancelled by their client: {[r for r in unsent if r.outcome != 'left'][:1]}",
    )
    errors = [r for r in records if r.outcome == "client_error"]
    check(
        not errors,
        f"{len(errors)} clients saw something unexpected, e.g. {errors[0] if errors else ''} "
        f"{errors[0].detail if errors else ''}",
    )

    figures = {
        "sent": len(records),
        "cancelled_before_sent": len(unsent),
        "accepted": accepted,
        "completed": len(completed),
        "completed_by_finish_reason": dict(Counter(r.finish_reason for r in completed)),
        "left_by_client": left,
        "deadline_504": deadline_504,
        "stream_errors": outcomes["stream_error"],
        "refused_by_status": {
            str(s): n
            for s, n in sorted(Counter(r.status for r in records if r.outcome == "refused").items())
        },
        "rejected_by_reason": rejected,
        "rate_limited_by_tenant": tenant_429,
        "rate_limited_by_limit": limit_429,
        "engine_finished": finished,
        "engine_aborted": aborted,
        "server_status": dict(server_status),
        "latency_p50_s": float(np.percentile(latencies, 50)),
        "latency_p99_s": float(np.percentile(latencies, 99)),
    }
    return figures, problems


def format_table(figures: dict, header: list[str]) -> str:
    refused = figures["refused_by_status"]
    reasons = figures["rejected_by_reason"]
    rows = [
        ("requests sent", figures["sent"]),
        ("  (cancelled before they were written, not sent)", figures["cancelled_before_sent"]),
        ("accepted by the engine", figures["accepted"]),
        (
            "completed (client saw a finish)",
            f"{figures['completed']}  {figures['completed_by_finish_reason']}",
        ),
        ("left by the client (hang-ups, cancels)", figures["left_by_client"]),
        ("ended by their deadline (504)", figures["deadline_504"]),
        ("rejected, by status", sum(refused.values()) - refused.get("504", 0)),
    ]
    labels = {
        "400": "400 bad request",
        "401": "401 no or wrong key",
        "403": "403 another tenant's key",
        "429": "429 tenant rate / concurrency limit",
        "431": "431 oversized header",
        "503": "503 queue full (Retry-After)",
    }
    rows += [(f"  {labels.get(s, s)}", n) for s, n in refused.items() if s != "504"]
    rows += [
        ("  429 by tenant", figures["rate_limited_by_tenant"]),
        ("  429 by limit", figures["rate_limited_by_limit"]),
        ("server refusal counters", {k: v for k, v in reasons.items() if k != "deadline"}),
        ("engine aborts by cause", figures["engine_aborted"]),
        (
            "latency of completed p50 / p99",
            f"{figures['latency_p50_s']:.2f} s / {figures['latency_p99_s']:.2f} s",
        ),
    ]
    rows += [(name, value) for name, value in figures.get("extra_rows", [])]
    width = max(len(name) for name, _ in rows)
    return "\n".join(header + [f"{name:<{width}}  {value}" for name, value in rows])
