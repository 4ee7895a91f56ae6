"""Engine profiles and the kernels they run: a profile picks the calibration of its own backend's
kernels and scales only another backend's, the older kernel era scales the linear layers of kernel
tables (per source and GPU), TensorRT-LLM's KV cache is sized from the memory left free, and the
cost models pickle to the same step times."""

import numpy as np
import pytest
from sim_helpers import cost_model, host_profile

from engine.core.step_shape import StepShape
from simulator.calibration.cost_model import CostModel
from simulator.calibration.engine_profile import SourceEra, load_profile
from simulator.calibration.kernel_era import era_factor
from simulator.calibration.profiled_cost_model import ProfiledCostModel
from simulator.calibration.schema import load_shipped
from simulator.calibration.weight_dtype import weight_dtype_calibration
from simulator.scenario import Scenario
from simulator.simulation import simulate
from simulator.validation.published_sets import load_published


def test_profile_kernels_pick_the_calibration_and_scale_only_other_backends():
    """A TensorRT-LLM (or SGLang) profile runs on the calibration of its own kernels where one is
    shipped (its kernel scales then do not apply); on another backend's calibration its per-bound
    scales multiply those terms only."""
    base = {
        "model": {"name": "llama-3-8b"},
        "hardware": {"gpu": "H100-80GB"},
        "traffic": {"arrivals": {"kind": "poisson", "rate_per_s": 2.0}, "duration_s": 5},
    }
    facts = simulate(Scenario.model_validate(base | {"engine_profile": "trtllm"})).facts
    assert "trtllm" in facts["calibration"]["name"]
    facts = simulate(Scenario.model_validate(base | {"engine_profile": "vllm-v0"})).facts
    assert "trtllm" not in facts["calibration"]["name"]
    facts = simulate(Scenario.model_validate(base | {"engine_profile": "sglang"})).facts
    assert "sglang" in facts["calibration"]["name"]

    gpu = cost_model(0.01, 1e-5, 1e-7)  # host step, compute per token, memory per context token
    profile = host_profile(0.0, step_s=0.0, sequence_s=0.0).model_copy(
        update={"kernel_backend": "trtllm", "kernel_scale_by_bound": {"memory": 0.5}}
    )
    shape = StepShape(decode_context_lens=(1000,) * 4)
    foreign = ProfiledCostModel(gpu, profile, calibration_backend="vllm")
    own = ProfiledCostModel(gpu, profile, calibration_backend="trtllm")
    memory = gpu.explain(shape)["decode attention"]  # the memory-bound term
    assert own.step_time(shape) == pytest.approx(gpu.step_time(shape))
    assert foreign.step_time(shape) == pytest.approx(gpu.step_time(shape) - memory / 2)


def test_kernel_era_scales_only_the_linear_layers_of_kernel_tables():
    """An older stack's linear layers over its own backend's kernel tables (derived from Vidur's
    2024 profiles and aiconfigurator's tables on the same layer shapes): applied to a calibration
    of those tables (a backend version named), on that GPU, to the linear-layer terms only."""
    calibrations = [load_shipped(name) for name in ("llama-2-7b@H100-80GB-tp1",)]
    calibrations.append(load_shipped("llama-2-7b@H100-80GB-tp1-aic-vllm"))
    factor = era_factor(calibrations, "H100-80GB")
    assert factor is not None and 1.05 < factor < 1.4
    assert era_factor(calibrations, "A100-80GB") is None  # no pair on that GPU

    table = calibrations[1]
    gpu = CostModel.from_calibration(table)
    profile = host_profile(0.0, step_s=0.0, sequence_s=0.0).model_copy(
        update={"kernel_backend": "vllm", "kernel_era_scales": {"H100-80GB": 1.5}}
    )
    shape = StepShape(decode_context_lens=(512,) * 8)
    linear = sum(s for name, s in gpu.explain(shape).items() if name.startswith("linear layers"))
    scaled = ProfiledCostModel(gpu, profile, 1.0, "vllm", ("H100-80GB", "0.24.0"))
    assert scaled.step_time(shape) == pytest.approx(gpu.step_time(shape) + 0.5 * linear)
    for where in (("A100-80GB", "0.24.0"), ("H100-80GB", None)):  # other GPU; not a table
        same = ProfiledCostModel(gpu, profile, calibration_backend="vllm", calibration_table=where)
        assert same.step_time(shape) == pytest.approx(gpu.step_time(shape))

    # fp8 weights: their linear layers keep the tables' time (the factor is derived from bf16
    # GEMMs; no 2024 profile timed fp8 ones), whatever the factor
    rng = np.random.default_rng(int(np.random.SeedSequence().entropy % 2**32))
    fp8 = CostModel.from_calibration(weight_dtype_calibration(table, "fp8"))
    factor = float(rng.uniform(1.05, 2.0))
    older = profile.model_copy(update={"kernel_era_scales": {"H100-80GB": factor}})
    contexts = tuple(int(c) for c in rng.integers(16, 4096, size=int(rng.integers(1, 64))))
    shape = StepShape(decode_context_lens=contexts)
    assert any(name.startswith("linear layers (fp8)") for name in fp8.explain(shape))
    era_fp8 = ProfiledCostModel(fp8, older, 1.0, "vllm", ("H100-80GB", "0.24.0"))
    assert era_fp8.step_time(shape) == pytest.approx(fp8.step_time(shape))


def test_source_era_applies_to_its_own_source_and_gpus_only():
    """A published source whose stack ran the kernel tables' own GEMMs on a GPU drops the profile's
    era scale there, for that source only; the shipped choice names the fit runs it was made on."""
    profile = host_profile(0.0).model_copy(
        update={
            "kernel_backend": "vllm",
            "kernel_era_scales": {"H100-80GB": 1.2, "A100-80GB": 1.03},
            "source_eras": {"lab": SourceEra(tables_gpus=["H100-80GB"], source="test")},
        }
    )
    assert profile.for_source("lab").kernel_era_scales == {"A100-80GB": 1.03}
    assert profile.for_source("other") is profile
    shipped = load_profile("vllm-v0")
    for name, era in shipped.source_eras.items():
        assert not load_published(name).get("held_out_only")  # never chosen on an independent check
        assert "fit runs" in era.source and set(era.tables_gpus) <= set(shipped.kernel_era_scales)


def test_trtllm_sizes_its_kv_cache_from_the_memory_left_free():
    """TensorRT-LLM's rule (`kv_memory`): `gpu_memory_utilization` of what is free after weights,
    build-time activations, NCCL and context, with the embedding whole on every GPU; a profile
    without a rule keeps the engine's formula, and the scenario field picks the rule."""
    from simulator.hardware.catalog import get_hardware
    from simulator.model_spec import ModelSpec
    from simulator.resolve import resolve_pool

    rule = load_profile("trtllm").kv_memory
    assert rule is not None and "aiconfigurator" in rule.source
    model, gpu = ModelSpec.from_preset("llama-2-70b", dtype="float16"), get_hardware("A100-40GB")
    block = model.kv_block_bytes_per_gpu(4, 64)
    embedding = model.vocab_size * model.hidden_size * model.dtype_bytes
    weights = model.weight_bytes_per_gpu(4) + embedding * 3 / 4
    free = gpu.memory_bytes - weights - rule.reserve_bytes(model.hidden_size, 4)
    expected = int(0.9 * free * (1 - rule.reserved_fraction) // block)
    blocks = rule.kv_blocks(
        gpu.memory_bytes, 0.9, model.weight_bytes_per_gpu(4), embedding, model.hidden_size, 4, block
    )
    assert blocks == expected > 0
    assert rule.reserve_bytes(model.hidden_size, 16) == rule.reserve_bytes(model.hidden_size, 8)
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        rule.kv_blocks(gpu.memory_bytes, 0.0, 1.0, 0.0, 1, 1, 1)

    def pool(profile: str | None) -> int:
        scenario = Scenario.model_validate(
            {
                "model": {"name": "llama-2-70b", "dtype": "float16"},
                "hardware": {"gpu": "A100-40GB", "tensor_parallel": 4},
                "engine_profile": profile,
                "scheduler": {"block_size": 64, "gpu_memory_utilization": 0.9},
            }
        )
        return resolve_pool(scenario, model)

    assert pool("trtllm") == blocks
    assert pool("vllm-v0") == pool(None) != blocks  # vLLM: a share of the whole GPU


def test_cost_models_pickle_to_the_same_step_times():
    """Ray ships cost models to its actors by pickle (`__reduce__`: rebuilt from what they were made
    of, which the compiled build's classes need); the copy times every step as the original."""
    import pickle

    gpu = cost_model(0.01, 1e-5, 1e-7)
    profile = host_profile(0.5, step_s=0.003).model_copy(
        update={"kernel_backend": "trtllm", "kernel_scale_by_bound": {"memory": 0.5}}
    )
    model = ProfiledCostModel(gpu, profile, scale=1.07, calibration_backend="vllm")
    shapes = [
        StepShape(decode_context_lens=(1000,) * 4),
        StepShape(prefill_chunks=((300, 64),), decode_context_lens=(40, 90)),
    ]
    for original in (gpu, model):
        copy = pickle.loads(pickle.dumps(original))
        assert type(copy) is type(original)
        assert [copy.step_time(s) for s in shapes] == [original.step_time(s) for s in shapes]
    assert pickle.loads(pickle.dumps(model)).stated_profile == profile
