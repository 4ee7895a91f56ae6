"""The bounded soak, short (benchmarks/soak.py runs the long one): a real server behind tenant keys,
offered twice its measured capacity by three tenants with hang-ups, cancels, deadlines and bad
requests. Nothing is lost (the clients' view and /metrics add up), the KV pool is whole, the RSS stays
within its bound after warm-up, and SIGTERM drains the server to exit status 0."""

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.append(str(REPO))

from benchmarks.soak import SoakSettings, report_table, run_soak  # noqa: E402

SHORT = SoakSettings(duration_s=12.0, load=2.0, seed=7, probe_s=2.0)


@pytest.mark.soak
def test_short_soak_loses_nothing():
    report = run_soak(SHORT)
    table = report_table(report)
    assert report["problems"] == [], table
    figures = report["figures"]
    # the mix reached every path it is meant to: a soak that refused or completed everything proves little
    assert (
        figures["completed"] > 0 and figures["left_by_client"] > 0 and figures["deadline_504"] > 0
    ), table
    assert {"400", "401", "403", "429", "431"} <= set(figures["refused_by_status"]), table
    assert (
        figures["rate_limited_by_tenant"]["beta"] > 0
        and figures["rate_limited_by_tenant"]["gamma"] > 0
    ), table
    assert figures["engine_aborted"].get("disconnect", 0) > 0, table
