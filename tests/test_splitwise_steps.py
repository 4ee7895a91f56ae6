"""Splitwise's own measured steps as calibrations (`benchmarks/splitwise_steps.py`): the fit reproduces
the characterization within the error it records, the H100 is faster than the A100 where Splitwise
measured it so, the anchor's reference (a request alone on a DGX-A100) is the same step model, and at
Splitwise's own scale the coding result it published (H100 prompt + A100 token machines at 20% lower
cost ahead of the co-located H100s) holds at one rate."""

import pytest

from benchmarks import splitwise_anchor as splitwise
from benchmarks.goodput_search import scenario_for
from benchmarks.splitwise_rows import measured_step_model
from benchmarks.splitwise_steps import HARDWARE, measured_calibration, measured_points
from engine.core.step_shape import StepShape
from simulator.calibration.cost_model import CostModel


@pytest.mark.parametrize("gpu", list(HARDWARE))
def test_fit_reproduces_the_characterization_within_its_recorded_error(gpu):
    calibration = measured_calibration(gpu)
    (error,) = calibration.cost_model.fit_errors
    assert error.num_points >= 20 and error.mape_train < 0.12 and error.max_ape < 0.6, error
    model = CostModel(calibration.cost_model)
    errors = [abs(model.step_time(shape) / seconds - 1) for shape, seconds in measured_points(gpu)]
    assert max(errors) == pytest.approx(error.max_ape)
    assert sum(errors) / len(errors) == pytest.approx(error.mape_train)
    # single prompts and decode batches, the steps the anchor runs most, within 25%
    for shape, seconds in measured_points(gpu):
        if len(shape.prefill_chunks) <= 1:
            assert abs(model.step_time(shape) / seconds - 1) < 0.25, shape


def test_h100_faster_than_a100_as_measured():
    a100, h100 = (CostModel(measured_calibration(gpu).cost_model) for gpu in HARDWARE)
    for shape in (StepShape(((2048, 0),), ()), StepShape((), (600,) * 32)):
        assert h100.step_time(shape) < 0.8 * a100.step_time(shape)


def test_anchor_reference_uses_the_measured_steps(tmp_path):
    files = measured_step_model(tmp_path)
    workload = splitwise.WORKLOADS["Splitwise conversation (Azure conv)"]
    assert splitwise.check_reference(workload, scenario_for, files) == pytest.approx(1.0)
    reference = splitwise.Reference("vllm-v1", files)  # the files' profile wins: whole steps
    prompt_s, token_s = reference.times(512)
    a100 = CostModel(measured_calibration("A100-80GB").cost_model)
    assert prompt_s == pytest.approx(a100.step_time(StepShape(((512, 0),), ())))
    assert token_s == pytest.approx(a100.step_time(StepShape((), (512,))))


def test_at_splitwises_scale_ha_at_lower_cost_holds_a_coding_rate_the_baseline_misses(tmp_path):
    """docs/measured/disaggregation.md "Anchor, Splitwise on Splitwise's own measured steps": a 40 DGX-H100 budget at
    Splitwise's prices, coding: the co-located baseline holds 112.5 req/s, Splitwise-HA 25P15D (20% lower
    cost) 150. At 130 req/s the baseline misses Splitwise's SLO and the HA fleet holds it."""
    files = measured_step_model(tmp_path)
    workload = splitwise.WORKLOADS["Splitwise coding (Azure code)"]
    designs = {design.name: design for design in splitwise.designs(40, "splitwise")}
    baseline = designs["Baseline-H100 (40 machines, mixed batching)"]
    split = designs["Splitwise-HA 25P15D"]
    assert split.cost_per_hour <= 0.8 * baseline.cost_per_hour
    worst = {}
    for design in (baseline, split):
        result = splitwise.run(workload, design, 130.0, 90.0, scenario_for, files)
        reference = splitwise.Reference("vllm-v1", files)
        worst[design.name] = max(splitwise.slo_margin(result.records, reference).values())
    assert worst[split.name] <= 1.0 < worst[baseline.name], worst


def test_as_simulated_token_steps_are_flat_in_the_batch_where_the_measured_ones_grow():
    """splitwise-sim's `db` model looks a decode batch up by its token count in a table indexed by
    prompt_size x batch_size, so 64 decodes read the time of one 64-token prompt's token step."""
    for gpu in HARDWARE:
        measured = CostModel(measured_calibration(gpu).cost_model)
        simulated = CostModel(measured_calibration(gpu, as_simulated=True).cost_model)
        one, many = StepShape((), (600,)), StepShape((), (600,) * 64)
        assert measured.step_time(many) > 1.5 * measured.step_time(one)
        assert simulated.step_time(many) == pytest.approx(simulated.step_time(one), rel=0.02)
        # prompt steps stay the measured ones
        prompt = StepShape(((2048, 0),), ())
        assert simulated.step_time(prompt) == pytest.approx(measured.step_time(prompt), rel=0.1)
