"""The plan's candidates: which GPUs can serve the model and at what tensor-parallel degree
(`candidate_fleets`: a `Fleet` per candidate at the degree asked for, or the smallest of 1, 2, 4, 8
whose weights leave room for KV and whose measured GEMMs and fused all-reduce exist; a candidate that
fits at none becomes a ledger row and a `does_not_fit` GPU row that says why), and the batch settings
each is searched over (`batch_grid`). Apart from `simulator.planner.recommend` (the searches and the
report) because this is where a candidate is refused before any simulation.
"""

from __future__ import annotations

from itertools import product

from simulator.hardware.catalog import get_hardware
from simulator.planner.fleet import Batch, Fleet, fleet_scenario
from simulator.planner.ledger import Ledger
from simulator.planner.outcome import Outcome
from simulator.planner.report import GpuRow
from simulator.planner.spec import PlanError, PlanSettings
from simulator.resolve import resolve_calibration_for, resolve_pool, scenario_calibration
from simulator.scenario import Scenario

TP_DEGREES = (1, 2, 4, 8)


def batch_grid(settings: PlanSettings) -> list[Batch]:
    """The largest setting first (it anchors the share pass), then the rest of the grid."""
    seqs, tokens = (
        sorted(settings.batch.max_num_seqs, reverse=True),
        sorted(settings.batch.max_num_batched_tokens, reverse=True),
    )
    return [
        Batch(s, t, kv_cache_dtype=kv)
        for s, t, kv in product(
            dict.fromkeys(seqs), dict.fromkeys(tokens), dict.fromkeys(settings.batch.kv_cache_dtype)
        )
    ]


def candidate_fleets(
    scenario: Scenario, settings: PlanSettings, low: int, high: int, ledger: Ledger
):
    """A `Fleet` per candidate that fits; ledger rows (and per-GPU rows) for those that do not."""
    try:
        model = scenario.model.spec()
    except (ValueError, KeyError) as error:
        raise PlanError(f"model.name: {error}") from None
    fleets, unfit = {}, []
    for index, candidate in enumerate(settings.candidate_list(scenario)):
        try:
            gpu = get_hardware(candidate.gpu).name
        except ValueError as error:
            raise PlanError(f"plan.candidates[{index}].gpu: {error}") from None
        degrees = [candidate.tensor_parallel] if candidate.tensor_parallel else list(TP_DEGREES)
        reasons = []
        for tp in degrees:
            try:
                probe = fleet_scenario(
                    scenario,
                    gpu,
                    tp,
                    1,
                    Batch(
                        scenario.scheduler.max_num_seqs, scenario.scheduler.max_num_batched_tokens
                    ),
                )
                resolve_pool(probe, model)
                if model.weight_dtype != "auto" or tp in probe.hardware.fused_all_reduce_mb:
                    # only where its GEMMs (and its fused all-reduce) were measured
                    scenario_calibration(probe, resolve_calibration_for(probe))
            except ValueError as error:
                reasons.append(str(error))
                continue
            fleets[f"{gpu} TP{tp}"] = Fleet(
                scenario,
                gpu,
                tp,
                low,
                high,
                settings.goodput_share,
                settings.early_stop,
                whole_fleet=settings.whole_fleet,
            )
            break
        else:
            message = reasons[-1] if reasons else "no tensor-parallel degree tried"
            outcome = Outcome(
                key="",
                share=None,
                share_replicas=1,
                step_scale=1.0,
                status="invalid",
                meets=False,
                reasons=["does_not_fit"],
                binding="does_not_fit",
                error=message,
            )
            ledger.add(
                {"phase": "fit check", "gpu": gpu, "tensor_parallel": degrees[-1]}, None, outcome
            )
            unfit.append(
                GpuRow(
                    gpu=gpu,
                    tensor_parallel=degrees[-1],
                    status="does_not_fit",
                    replicas=None,
                    reason=message,
                )
            )
    return fleets, unfit
