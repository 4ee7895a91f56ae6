"""The planner behind the Plan page: one outcome cache for the app's life, each plan cached by its
scenario and settings, and the planner's errors as messages."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

import streamlit as st
from pydantic import ValidationError

from dashboard.data.scenarios import explain
from simulator.planner.report import PlanReport
from simulator.scenario import Scenario


@dataclass
class PlanAnswer:
    """What the Plan page shows: the planner's report, the ledger's full-fleet points with their
    cost/P99 Pareto front, and the ledger as CSV (`ledger_rows` rows)."""

    report: PlanReport
    pareto_points: list[dict]
    pareto_front: list[dict]
    ledger_csv: str
    ledger_rows: int


@st.cache_resource(show_spinner=False)
def _plan_outcomes():
    """One planner outcome cache for the app's life: re-planning re-simulates only what changed."""
    from simulator.planner.cache import OutcomeCache

    return OutcomeCache()


@st.cache_data(max_entries=32, show_spinner=False)
def plan(scenario_json: str, settings: dict) -> tuple[PlanAnswer | None, str | None]:
    """(the planner's report with its Pareto points and the ledger as CSV, None) or (None, the
    planner's explanation: no fleet in range meets the SLO, the model fits no GPU, ...)."""
    from simulator.planner import PlanSettings
    from simulator.planner import plan as run_plan
    from simulator.planner.ledger import COLUMNS
    from simulator.planner.pareto import pareto_front, pareto_points

    try:
        checked = PlanSettings.model_validate(settings)
        result = run_plan(
            Scenario.model_validate_json(scenario_json),
            checked,
            progress=False,
            cache=_plan_outcomes(),
        )
    except ValidationError as error:
        return None, explain(error)
    except ValueError as error:  # PlanError is a ValueError: a user error, explained
        return None, str(error)
    points = pareto_points(result.ledger.rows)
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(COLUMNS), extrasaction="ignore")
    writer.writeheader()
    writer.writerows(result.ledger.rows)
    return PlanAnswer(
        report=result.report,
        pareto_points=points,
        pareto_front=pareto_front(points),
        ledger_csv=text.getvalue(),
        ledger_rows=len(result.ledger.rows),
    ), None
