"""The cost model: NNLS against brute force, recovery of planted physics, step-time behaviour."""

import itertools

import numpy as np
import pytest
from sim_helpers import cluster_config, run_cluster

from engine.core.step_shape import StepShape
from simulator.calibration.cost_fit import fit_cost_model
from simulator.calibration.cost_model import PROFILE_TERMS, CostModel, feature_value
from simulator.calibration.fitting import kfold_indices, nnls
from simulator.calibration.schema import CostModelFit, CostTerm


def _brute_force_nnls(matrix, target):
    """Try every column subset: the feasible unconstrained solution with least residual is the NNLS optimum."""
    best_residual, best = np.inf, np.zeros(matrix.shape[1])
    for size in range(matrix.shape[1] + 1):
        for columns in itertools.combinations(range(matrix.shape[1]), size):
            x = np.zeros(matrix.shape[1])
            if columns:
                solution = np.linalg.lstsq(matrix[:, columns], target, rcond=None)[0]
                if (solution < 0).any():
                    continue
                x[list(columns)] = solution
            residual = np.linalg.norm(matrix @ x - target)
            if residual < best_residual:
                best_residual, best = residual, x
    return best


def test_nnls_matches_brute_force_on_random_problems():
    rng = np.random.default_rng(7)
    for _ in range(100):
        rows, cols = int(rng.integers(6, 30)), int(rng.integers(1, 7))
        matrix = rng.normal(size=(rows, cols)) * rng.uniform(
            1e-3, 1e3, size=cols
        )  # badly scaled columns
        target = rng.normal(size=rows)
        x = nnls(matrix, target)
        assert (x >= 0).all()
        reference = _brute_force_nnls(matrix, target)
        assert (
            np.linalg.norm(matrix @ x - target)
            <= np.linalg.norm(matrix @ reference - target) + 1e-9
        )


def test_kfold_holds_out_every_row_once():
    folds = kfold_indices(23, 5, seed=3)
    assert sorted(np.concatenate(folds).tolist()) == list(range(23))
    with pytest.raises(ValueError, match="2 ≤ folds ≤ points"):
        kfold_indices(3, 5, seed=0)


def _planted_model(rng) -> CostModel:
    values = {
        "step": rng.uniform(5e-3, 2e-2),
        "gemm_step": rng.uniform(0, 5e-3),
        "gemv_extra_token": rng.uniform(1e-3, 4e-3),
        "sequence": rng.uniform(1e-4, 1e-3),
        "token": rng.uniform(1e-5, 1e-4),
        "token_above_knee": rng.uniform(1e-4, 5e-4),
        "token_above_spill": rng.uniform(0, 2e-4),
        "prefill_attention_pair": rng.uniform(1e-8, 1e-7),
        "decode_context_token": rng.uniform(1e-6, 1e-5),
        "decode_step": rng.uniform(1e-3, 5e-3),  # each attention path's fixed cost per step
        "prefill_step": rng.uniform(1e-3, 5e-3),
    }
    terms = [
        CostTerm(
            name=name,
            feature=feature,
            seconds_per_unit=values[feature],
            bound=bound,
            label="derived",
        )
        for feature, (name, bound) in PROFILE_TERMS.items()
    ]
    return CostModel(
        CostModelFit(
            knee_tokens=float(rng.uniform(16, 128)),
            knee_label="derived",
            terms=terms,
            spill_tokens=float(rng.uniform(200, 600)),
            gemm_switch_tokens=int(rng.integers(2, 6)),
        )
    )


def _random_shape(rng) -> StepShape:
    kind = rng.choice(["prefill", "decode", "few-token decode", "mixed"], p=[0.3, 0.3, 0.15, 0.25])
    chunks = (
        ((int(rng.integers(8, 1024)), int(rng.integers(0, 4)) * 256),)
        if "decode" not in kind
        else ()
    )
    batch = int(rng.integers(1, 5)) if kind == "few-token decode" else int(rng.integers(1, 64))
    decodes = tuple(int(c) for c in rng.integers(16, 2048, size=batch)) if kind != "prefill" else ()
    return StepShape(prefill_chunks=chunks, decode_context_lens=decodes)


def test_fit_recovers_planted_physics_and_predicts_unseen_shapes():
    rng = np.random.default_rng(11)
    for _ in range(2):
        truth = _planted_model(rng)
        shapes = [_random_shape(rng) for _ in range(60)]
        measured = truth.step_times(shapes) * (1 + rng.normal(0, 0.01, size=len(shapes)))
        fit = fit_cost_model(shapes, measured, folds=5, seed=1)
        assert fit.fit_errors[0].mape_cross_validated < 0.03
        fresh = [_random_shape(rng) for _ in range(40)]
        predicted, expected = CostModel(fit).step_times(fresh), truth.step_times(fresh)
        assert np.mean(np.abs(predicted - expected) / expected) < 0.05
        assert all(term.seconds_per_unit >= 0 and term.label == "fitted" for term in fit.terms)


def test_fit_charges_a_mixed_step_both_attention_paths():
    """An engine whose steps cost a floor per attention path (our engine on an H200: ~10 ms each), so a
    mixed step pays both: the fit finds both floors and predicts unseen mixed steps, where a model
    without them splits the difference between prefill-only and decode-only steps."""
    rng = np.random.default_rng(int(np.random.SeedSequence().entropy % 2**32))
    decode_floor, prefill_floor = rng.uniform(5e-3, 15e-3, size=2)
    per_token, per_seq = rng.uniform(1e-6, 1e-5), rng.uniform(1e-5, 1e-4)

    def truth(shape: StepShape) -> float:
        return (
            rng.uniform(0.99, 1.01)  # 1% noise
            * (
                decode_floor * (shape.num_decode_seqs > 0)
                + prefill_floor * (shape.num_prefill_seqs > 0)
                + per_token * shape.num_batched_tokens
                + per_seq * shape.num_seqs
            )
        )

    shapes = [_random_shape(rng) for _ in range(60)]
    fit = fit_cost_model(shapes, [truth(s) for s in shapes], folds=5, seed=1)
    floors = {t.feature: t.seconds_per_unit for t in fit.terms}
    assert (
        floors["decode_step"] > 0.5 * decode_floor and floors["prefill_step"] > 0.5 * prefill_floor
    )
    mixed = [
        s
        for s in (_random_shape(rng) for _ in range(200))
        if s.num_decode_seqs and s.num_prefill_seqs
    ]
    predicted = CostModel(fit).step_times(mixed)
    expected = np.array([truth(s) for s in mixed])
    assert np.mean(np.abs(predicted - expected) / expected) < 0.05


def test_absolute_fit_keeps_a_noisy_workloads_total_time_where_relative_fit_falls_short():
    """Single samples with heavy right-skewed noise (a live workload's steps): relative least squares
    favours the fast draws and under-predicts the total; the absolute objective keeps the sum."""
    rng = np.random.default_rng(3)
    truth = _planted_model(rng)
    shapes = [_random_shape(rng) for _ in range(200)]
    measured = truth.step_times(shapes) * rng.lognormal(0.0, 0.3, size=len(shapes))
    totals = {}
    for objective in ("relative", "absolute"):
        fit = fit_cost_model(shapes, measured, folds=3, seed=1, objective=objective)
        totals[objective] = CostModel(fit).step_times(shapes).sum() / measured.sum()
        assert objective in fit.fit_errors[0].note
    assert totals["relative"] < 0.95  # biased low
    assert abs(totals["absolute"] - 1) < 0.03  # unbiased in total time
    with pytest.raises(ValueError, match="objective 'squared'"):
        fit_cost_model(shapes, measured, objective="squared")


def test_step_time_is_the_sum_of_its_terms_and_grows_with_work():
    rng = np.random.default_rng(5)
    model = _planted_model(rng)
    assert model.step_time(StepShape()) == 0.0
    for _ in range(30):
        shape = _random_shape(rng)
        assert model.step_time(shape) == pytest.approx(sum(model.explain(shape).values()))
        longer = StepShape(shape.prefill_chunks, tuple(c + 100 for c in shape.decode_context_lens))
        bigger = StepShape(shape.prefill_chunks + ((64, 0),), shape.decode_context_lens)
        assert model.step_time(longer) >= model.step_time(shape)
        if shape.num_batched_tokens >= model.fit.gemm_switch_tokens:
            # (below the GEMM switch a step may cost more than a bigger one: BLAS does that too)
            assert model.step_time(bigger) > model.step_time(shape)


def test_step_time_adds_what_explain_reports_bit_for_bit_and_simulations_never_explain(monkeypatch):
    """`explain` (a dict per call) is for display; `step_time` adds the same per-name seconds, terms sharing a
    name first, to the last bit, and a simulated run never calls `explain`."""
    rng = np.random.default_rng(9)
    model = _planted_model(rng)
    extra = [
        term.model_copy(update={"seconds_per_unit": term.seconds_per_unit / 3})
        for term in model.fit.terms[::3]
    ]
    shared = CostModel(
        model.fit.model_copy(update={"terms": model.fit.terms + extra})
    )  # names appear twice
    for _ in range(50):
        shape = _random_shape(rng)
        for each in (model, shared):
            parts: dict[str, float] = {}
            for term in each.fit.terms:  # the definition: each term's seconds, summed by name
                seconds = term.seconds_per_unit * feature_value(term.feature, shape, each.fit)
                parts[term.name] = parts.get(term.name, 0.0) + seconds
            assert each.explain(shape) == parts
            assert each.step_time(shape) == sum(parts.values())
    monkeypatch.setattr(
        CostModel, "explain", lambda self, shape: pytest.fail("explain ran in a simulation")
    )
    arrival = np.cumsum(rng.exponential(0.05, 60))
    cluster, _ = run_cluster(
        cluster_config(shared), arrival, rng.integers(10, 200, 60), rng.integers(2, 40, 60)
    )
    assert all(record.status == "ok" for record in cluster.records)


def test_linear_layers_follow_the_roofline_knee():
    rng = np.random.default_rng(2)
    model = _planted_model(rng)
    term = {t.feature: t.seconds_per_unit for t in model.fit.terms}
    knee = model.knee_tokens
    below = [model.explain(StepShape(prefill_chunks=((n, 0),))) for n in (1, int(knee) - 1)]
    name = PROFILE_TERMS["token_above_knee"][0]
    assert below[0][name] == below[1][name] == pytest.approx(term["token_above_knee"] * knee)
    above = model.explain(StepShape(prefill_chunks=((4 * int(knee), 0),)))[name]
    assert above == pytest.approx(term["token_above_knee"] * 4 * int(knee))


def test_fit_rejects_unusable_input():
    shapes = [StepShape(decode_context_lens=(10,))] * 8
    with pytest.raises(ValueError, match="at least 8 points"):
        fit_cost_model(shapes[:3], [0.01] * 3)
    with pytest.raises(ValueError, match="empty step shape"):
        fit_cost_model(shapes[:7] + [StepShape()], [0.01] * 8)
    with pytest.raises(ValueError, match="> 0 seconds"):
        fit_cost_model(shapes, [0.01] * 7 + [0.0])


def test_stratified_folds_spread_every_kind_of_step():
    rng = np.random.default_rng(9)
    strata = list(rng.choice(["decode", "prefill", "single-token"], size=40, p=[0.5, 0.4, 0.1]))
    folds = kfold_indices(40, 5, seed=int(rng.integers(1000)), strata=strata)
    assert sorted(np.concatenate(folds).tolist()) == list(range(40))
    assert max(map(len, folds)) - min(map(len, folds)) <= 1
    for label in set(strata):
        per_fold = [sum(strata[i] == label for i in fold) for fold in folds]
        assert max(per_fold) - min(per_fold) <= 1  # a rare regime is never held out whole


def test_the_validation_ladder_and_the_profile_grid_let_the_fit_place_the_gemm_switch():
    """A CPU's BLAS runs a few tokens as matrix-vector passes (cpu-small here: 2 and 3 tokens 20 and 26
    ms, 4 tokens 18 ms): a fit that saw no step of some count below the switch can put the switch
    anywhere in the gap and time those steps far off. Decode steps at the ladder's and the quick
    grid's batch sizes (each count up to the largest switch candidate) pin it: every few-token step
    of a fresh planted model is predicted within 5%."""
    from simulator.calibration.cost_fit import FEW_TOKEN_COUNTS, GEMM_SWITCH_CANDIDATES
    from simulator.calibration.profile_grid import ProfileGrid
    from simulator.validation.workload import LADDER

    rng = np.random.default_rng(int(np.random.SeedSequence().entropy % 2**32))
    max_num_seqs = int(rng.integers(max(FEW_TOKEN_COUNTS), 300))
    for batches in (
        LADDER,
        ProfileGrid.quick().decode_batches,
        ProfileGrid.full(max_num_seqs).decode_batches,
    ):
        assert set(FEW_TOKEN_COUNTS) <= set(batches), batches
    assert max(FEW_TOKEN_COUNTS) == max(GEMM_SWITCH_CANDIDATES)
    for _ in range(2):
        truth = _planted_model(rng)
        shapes = [
            StepShape(decode_context_lens=tuple(int(c) for c in rng.integers(16, 512, size=batch)))
            for batch in LADDER
            for _ in range(3)
        ] + [StepShape(prefill_chunks=((int(rng.integers(16, 512)), 0),)) for _ in range(8)]
        measured = truth.step_times(shapes) * (1 + rng.normal(0, 0.01, size=len(shapes)))
        fit = fit_cost_model(shapes, measured, folds=3, seed=1, objective="absolute")
        few = [StepShape(decode_context_lens=(200,) * batch) for batch in FEW_TOKEN_COUNTS]
        predicted, expected = CostModel(fit).step_times(few), truth.step_times(few)
        assert np.all(np.abs(predicted / expected - 1) < 0.05), (
            truth.fit.gemm_switch_tokens,
            fit.gemm_switch_tokens,
            predicted / expected,
        )
