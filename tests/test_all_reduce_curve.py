"""The tensor-parallel all-reduce as measured: a kernel-table calibration reads its table's times at
the step's tokens (log-log between sizes) instead of an affine fit, which ran 15-40% short at decode
sizes and 15-20% long at 4,096-8,192 tokens on aiconfigurator's H100 / H200 tables."""

from pathlib import Path

import numpy as np
import pytest

from engine.core.step_shape import StepShape
from simulator.calibration.aic_fit import all_reduce_curve
from simulator.calibration.aic_tables import AllReduceTable
from simulator.calibration.all_reduce_curve import AllReduceCurve
from simulator.calibration.cost_model import CostModel
from simulator.calibration.schema import CostModelFit, CostTerm, load_shipped


def _rng():
    return np.random.default_rng(int(np.random.SeedSequence().entropy % 2**32))


def _random_curve(rng) -> AllReduceCurve:
    tokens = np.cumprod(rng.uniform(1.5, 3.0, size=int(rng.integers(4, 12))))
    seconds = np.cumsum(rng.uniform(1e-6, 1e-4, size=len(tokens)))  # growing with size
    return AllReduceCurve(tokens=tokens.tolist(), seconds=seconds.tolist())


def _model(curve: AllReduceCurve, scale: float = 1.0) -> CostModel:
    terms = [
        CostTerm(
            name="linear", feature="token", seconds_per_unit=1e-5, bound="memory", label="fitted"
        ),
        CostTerm(
            name="tensor-parallel all-reduce",
            feature="all_reduce_curve",
            seconds_per_unit=scale,
            bound="network",
            label="measured",
        ),
    ]
    return CostModel(
        CostModelFit(knee_tokens=0, knee_label="fitted", terms=terms, all_reduce_curve=curve)
    )


def _all_reduce_s(model: CostModel, tokens: int) -> float:
    shape = StepShape(prefill_chunks=((tokens, 0),))
    return model.explain(shape)["tensor-parallel all-reduce"]


def test_the_curve_gives_the_measured_time_at_measured_sizes_and_log_log_between():
    rng = _rng()
    curve = _random_curve(rng)
    scale = float(rng.uniform(0.5, 2.0))
    model = _model(curve, scale)
    sizes, seconds = np.array(curve.tokens), np.array(curve.seconds)
    for size, measured in zip(sizes, seconds):
        if size == int(size) and size >= 1:
            assert _all_reduce_s(model, int(size)) == pytest.approx(scale * measured)
    # between two sizes: on the straight line through them in log-log space
    for i in range(len(sizes) - 1):
        lo, hi = int(np.ceil(sizes[i])), int(np.floor(sizes[i + 1]))
        for tokens in {lo, (lo + hi) // 2, hi} - {0}:
            if not sizes[i] <= tokens <= sizes[i + 1]:
                continue
            share = np.log(tokens / sizes[i]) / np.log(sizes[i + 1] / sizes[i])
            expected = seconds[i] * (seconds[i + 1] / seconds[i]) ** share
            assert _all_reduce_s(model, tokens) == pytest.approx(scale * expected, rel=1e-9)
    # beyond the largest: the last two sizes' slope (bandwidth-bound); below the smallest: its time
    slope = (seconds[-1] - seconds[-2]) / (sizes[-1] - sizes[-2])
    far = int(sizes[-1] * 3) + 1
    assert _all_reduce_s(model, far) == pytest.approx(
        scale * (seconds[-1] + slope * (far - sizes[-1]))
    )
    if sizes[0] >= 1:
        assert _all_reduce_s(model, 1) == pytest.approx(scale * seconds[0])


def test_a_decode_stretch_pays_the_curve_each_step_and_only_attention_grows():
    rng = _rng()
    curve = _random_curve(rng)
    model = _model(curve)
    contexts = tuple(int(c) for c in rng.integers(16, 2048, size=int(rng.integers(1, 64))))
    shape = StepShape(decode_context_lens=contexts)
    times = model.decode_stretch_times(shape, 5)
    assert times == pytest.approx([model.step_time(shape)] * 5)  # no attention term: flat
    assert model.step_time(shape) == pytest.approx(
        1e-5 * len(contexts) + _all_reduce_s(model, len(contexts))
    )


def test_a_curve_must_be_ascending_and_positive():
    with pytest.raises(ValueError, match="ascending"):
        AllReduceCurve(tokens=[1.0, 1.0, 2.0], seconds=[1e-6, 2e-6, 3e-6])
    with pytest.raises(ValueError, match="one time per size"):
        AllReduceCurve(tokens=[1.0, 2.0, 4.0], seconds=[1e-6, 2e-6])
    with pytest.raises(ValueError, match="> 0"):
        AllReduceCurve(tokens=[1.0, 2.0], seconds=[0.0, 1e-6])


def test_the_importer_keeps_the_table_from_one_token_on_and_holds_each_size_out():
    rng = _rng()
    model = load_shipped("llama-3-70b@H100-80GB-tp4-aic-trtllm").model
    exponent = float(rng.uniform(0.5, 1.0))  # a power law: log-log interpolation is exact on it
    elements = np.array([2.0**p for p in range(8, 28)])
    seconds = 3e-6 * (elements / elements[0]) ** exponent
    table = AllReduceTable(Path("x/data/h100_sxm/comm"), "1.0", "custom", elements, seconds)
    count = int(rng.integers(2, 200))
    curve, error = all_reduce_curve(table, model, count)
    # from the largest size at or below one token (hidden size elements) on, times `count`
    first = int(np.flatnonzero(elements <= model.hidden_size)[-1])
    assert curve.tokens == pytest.approx((elements[first:] / model.hidden_size).tolist())
    assert curve.seconds == pytest.approx((count * seconds[first:]).tolist())
    assert error.mape_cross_validated == pytest.approx(0.0, abs=1e-12)
    # a kinked table (a protocol switch): the size at the kink is missed by its neighbours
    kinked = seconds * np.where(elements >= 2.0**20, 0.6, 1.0)
    _, kink_error = all_reduce_curve(
        AllReduceTable(Path("x"), "1.0", "custom", elements, kinked), model, count
    )
    assert kink_error.max_ape > 0.1


def test_shipped_kernel_table_calibrations_read_their_all_reduce_as_measured():
    """At decode sizes the old affine fit was 15-40% short of the H100 TensorRT-LLM table; the curve
    is the table itself there."""
    calibration = load_shipped("llama-3-70b@H100-80GB-tp4-aic-trtllm")
    fit = calibration.cost_model
    (term,) = [t for t in fit.terms if t.name == "tensor-parallel all-reduce"]
    assert term.feature == "all_reduce_curve" and term.label == "measured"
    assert fit.all_reduce_curve is not None
    model = CostModel(fit)
    per_step = 2 * calibration.model.num_layers
    # 128 tokens = 2**20 elements, a measured size: 26.1 us a call on this table
    assert _all_reduce_s(model, 128) / per_step == pytest.approx(26.1e-6, rel=0.01)
    assert [e for e in fit.fit_errors if e.target.startswith("all-reduce")][0].note.startswith(
        "h100_sxm/comm/trtllm"
    )


def test_a_calibration_carried_to_other_hardware_keeps_its_curve_scaled_by_the_link_ratio():
    from simulator.calibration.carry_hardware import derive_for_hardware, scale_factor
    from simulator.hardware.catalog import get_hardware

    rng = _rng()
    calibration = load_shipped("llama-3-70b@H100-80GB-tp4-aic-trtllm")
    source = get_hardware("H100-80GB")
    target = get_hardware(str(rng.choice(["B200-180GB", "A100-80GB", "L40S"])))
    carried = derive_for_hardware(calibration, source, target)
    ratio = scale_factor("network", source, target, calibration.dtype)
    tokens = int(rng.integers(1, 16384))
    before, after = (CostModel(c.cost_model) for c in (calibration, carried))
    assert _all_reduce_s(after, tokens) == pytest.approx(ratio * _all_reduce_s(before, tokens))
