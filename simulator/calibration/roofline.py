"""Cost terms from first principles (bytes over bandwidth, FLOPs over compute rate) with stated
efficiency figures, for what no table measured: attention, the LM head, host overhead, and whole
GPUs we have no measurement of. Carrying a measured calibration to other hardware by datasheet ratios
is `simulator.calibration.carry_hardware`'s."""

from pydantic import BaseModel, ConfigDict, Field

from simulator.calibration.schema import Calibration, CostModelFit, CostTerm, DeviceInfo, Provenance
from simulator.hardware.spec import HardwareSpec
from simulator.model_spec import ModelSpec

DECODE_BW_MEASURED = 0.82


class Efficiencies(BaseModel):
    """Fractions of datasheet peaks that real kernels reach; each is a stated assumption."""

    model_config = ConfigDict(frozen=True)

    # Weight-streaming GEMV/GEMM at small batch: the public A100 table's Llama-2-7B projections at
    # 1 token read their weights at ~1.5 of 2.04 TB/s, i.e. ~75%.
    weight_read: float = Field(default=0.75, gt=0, le=1)
    # Large GEMMs. Was 65% (Vidur's A100 table at 4096 tokens, elementwise ops included); the bf16
    # GEMM sweeps of aiconfigurator's database reach a median 79% of the dense peak over ten GPUs
    # (64-91%; `benchmarks/calibration_sources.py` (b)), which removed a prefill bias of 5-27%.
    matmul: float = Field(default=0.79, gt=0, le=1)
    # Paged decode attention streams KV at this share of HBM bandwidth at long contexts. Was 70% (an
    # assumption); aiconfigurator's measured vLLM decode kernels stream at 82% on the A100 and L40S
    # (the Ampere/Ada generations of the GPUs still left to the roofline), 93-95% on Hopper and
    # ~100% on Blackwell.
    decode_attention_bandwidth: float = Field(default=DECODE_BW_MEASURED, gt=0, le=1)
    # FlashAttention forward. Was 50% (an assumption); aiconfigurator's measured prefill kernels
    # reach a median 68% of the dense peak over ten GPUs (55-82%).
    prefill_attention_compute: float = Field(default=0.68, gt=0, le=1)
    # Elementwise kernels (norms, RoPE, activation, residual adds) stream at ~60% of bandwidth.
    elementwise_bandwidth: float = Field(default=0.60, gt=0, le=1)


DEFAULT_EFFICIENCIES = Efficiencies()
# Assumed host costs of a vLLM-v1-class engine on a GPU (CUDA graphs, overlapped scheduling);
# our own profiler replaces them when a GPU is at hand.
HOST_STEP_S = 0.25e-3
HOST_SEQUENCE_S = 2e-6
# Per-layer fixed kernel latency with ~10 launches per layer under CUDA graphs.
LAYER_LATENCY_S = 15e-6
ALL_REDUCE_LATENCY_S = 10e-6
# A decode attention kernel costs this much per layer however short the contexts: the median of the
# per-layer floors fitted on aiconfigurator's measured vLLM decode kernels over ten GPUs (8-17 µs on
# NVIDIA parts; `benchmarks/calibration_sources.py` (b)). The roofline had none.
DECODE_ATTENTION_FLOOR_PER_LAYER_S = 10e-6
ALL_REDUCES_PER_LAYER = 2  # after attention and after the MLP (Megatron-style tensor parallelism)


def _memory_time(num_bytes: float, hardware: HardwareSpec, efficiency: float) -> float:
    return num_bytes / (hardware.memory_bandwidth_bytes_per_s * efficiency)


def _compute_time(flops: float, hardware: HardwareSpec, dtype: str, efficiency: float) -> float:
    return flops / (hardware.peak_flops(dtype) * efficiency)


def attention_terms(
    model: ModelSpec,
    hardware: HardwareSpec,
    tensor_parallel: int,
    eff: Efficiencies = DEFAULT_EFFICIENCIES,
) -> list[CostTerm]:
    """Decode reads each context token's K and V once; prefill does 4·heads·head_dim FLOPs per
    causal query-key pair per layer (FlashAttention skips the masked half, so pairs are exact)."""
    kv_bytes = model.kv_bytes_per_token_per_gpu(tensor_parallel)
    pair_flops = model.attention_flops_per_pair / tensor_parallel
    return [
        CostTerm(
            name="decode attention: per-layer floor",
            feature="decode_step",
            bound="latency",
            label="derived",
            seconds_per_unit=model.num_layers * DECODE_ATTENTION_FLOOR_PER_LAYER_S,
            note=f"{DECODE_ATTENTION_FLOOR_PER_LAYER_S * 1e6:.0f} µs per layer (aiconfigurator's measured "
            "decode kernels, median over ten GPUs)",
        ),
        CostTerm(
            name="decode attention (KV read)",
            feature="decode_context_token",
            bound="memory",
            label="derived",
            seconds_per_unit=_memory_time(kv_bytes, hardware, eff.decode_attention_bandwidth),
            note=f"{kv_bytes} KV bytes per token per GPU over {eff.decode_attention_bandwidth:.0%} of "
            f"{hardware.memory_bandwidth_bytes_per_s / 1e12:.3g} TB/s",
        ),
        CostTerm(
            name="prefill attention (FLOPs)",
            feature="prefill_attention_pair",
            bound="compute",
            label="derived",
            seconds_per_unit=_compute_time(
                pair_flops, hardware, model.dtype, eff.prefill_attention_compute
            ),
            note=f"{pair_flops:.4g} FLOPs per pair per GPU at {eff.prefill_attention_compute:.0%} of "
            f"{hardware.peak_flops(model.dtype) / 1e12:.4g} TFLOP/s",
        ),
    ]


def lm_head_terms(
    model: ModelSpec,
    hardware: HardwareSpec,
    tensor_parallel: int,
    eff: Efficiencies = DEFAULT_EFFICIENCIES,
) -> list[CostTerm]:
    """The LM head reads its weights once per step and multiplies only the sampled positions."""
    head_bytes = model.vocab_size * model.hidden_size * model.dtype_bytes / tensor_parallel
    return [
        CostTerm(
            name="LM head",
            feature="step",
            bound="memory",
            label="derived",
            seconds_per_unit=_memory_time(head_bytes, hardware, eff.weight_read),
            note=f"{head_bytes / 1e6:.0f} MB of LM-head weights per GPU at {eff.weight_read:.0%} of bandwidth",
        ),
        CostTerm(
            name="LM head",
            feature="sequence",
            bound="compute",
            label="derived",
            seconds_per_unit=_compute_time(
                model.lm_head_flops_per_sequence / tensor_parallel,
                hardware,
                model.dtype,
                eff.matmul,
            ),
            note=f"2·vocab·hidden FLOPs per sequence at {eff.matmul:.0%} of peak",
        ),
    ]


def host_terms() -> list[CostTerm]:
    note = "assumed for a vLLM-v1-class engine with CUDA graphs; profile our engine on this GPU to replace"
    return [
        CostTerm(
            name="host overhead",
            feature="step",
            bound="host",
            label="derived",
            seconds_per_unit=HOST_STEP_S,
            note=note,
        ),
        CostTerm(
            name="host overhead",
            feature="sequence",
            bound="host",
            label="derived",
            seconds_per_unit=HOST_SEQUENCE_S,
            note=note,
        ),
    ]


def linear_roofline(
    model: ModelSpec,
    hardware: HardwareSpec,
    tensor_parallel: int,
    eff: Efficiencies = DEFAULT_EFFICIENCIES,
) -> tuple[float, list[CostTerm]]:
    """(knee tokens, terms) of the transformer layers: weights streamed once per step below the
    knee, FLOPs per token above it, plus per-layer kernel latency and elementwise traffic."""
    layer_bytes = model.linear_params_per_layer * model.dtype_bytes / tensor_parallel
    floor_s = model.num_layers * _memory_time(layer_bytes, hardware, eff.weight_read)
    compute_per_token_s = _compute_time(
        model.linear_flops_per_token / tensor_parallel, hardware, model.dtype, eff.matmul
    )
    # Per token per layer: two norms, RoPE, two residual adds (hidden-sized) and the gated
    # activation (reads 2·intermediate, writes intermediate), each read and written.
    elementwise_bytes = (
        10 * model.hidden_size + 3 * model.intermediate_size / tensor_parallel
    ) * model.dtype_bytes
    note = f"datasheet peaks × efficiencies {eff.model_dump()}"
    terms = [
        CostTerm(
            name="linear layers: fixed latency",
            feature="step",
            bound="latency",
            label="derived",
            seconds_per_unit=model.num_layers * LAYER_LATENCY_S,
            note=f"{LAYER_LATENCY_S * 1e6:.0f} µs per layer",
        ),
        CostTerm(
            name="linear layers: elementwise per token",
            feature="token",
            bound="memory",
            label="derived",
            seconds_per_unit=model.num_layers
            * _memory_time(elementwise_bytes, hardware, eff.elementwise_bandwidth),
            note=note,
        ),
        CostTerm(
            name="linear layers: max(tokens, knee) × compute",
            feature="token_above_knee",
            bound="compute",
            label="derived",
            seconds_per_unit=compute_per_token_s,
            note=note,
        ),
    ]
    return floor_s / compute_per_token_s, terms


def all_reduce_cost_terms(
    step_s: float, token_s: float, label: str, step_note: str, token_note: str
) -> list[CostTerm]:
    """A step's tensor-parallel all-reduces as two terms: a latency per step (every call's fixed
    cost) and a cost per token (its bytes over the links); the one place their names and bounds live,
    for the derived form below and the fitted one (`vidur_all_reduce`)."""
    return [
        CostTerm(
            name="tensor-parallel all-reduce",
            feature="step",
            bound="latency",
            label=label,
            seconds_per_unit=step_s,
            note=step_note,
        ),
        CostTerm(
            name="tensor-parallel all-reduce",
            feature="token",
            bound="network",
            label=label,
            seconds_per_unit=token_s,
            note=token_note,
        ),
    ]


def all_reduce_roofline(
    model: ModelSpec, hardware: HardwareSpec, tensor_parallel: int
) -> list[CostTerm]:
    """Ring all-reduce of each layer's activations: 2·(N−1)/N of the bytes cross each link."""
    if tensor_parallel == 1:
        return []
    count = ALL_REDUCES_PER_LAYER * model.num_layers
    bytes_per_token = (
        model.hidden_size * model.dtype_bytes * 2 * (tensor_parallel - 1) / tensor_parallel
    )
    return all_reduce_cost_terms(
        count * ALL_REDUCE_LATENCY_S,
        count * bytes_per_token / hardware.interconnect_bandwidth_bytes_per_s,
        "derived",
        f"{count} all-reduces per step",
        f"ring all-reduce over {hardware.interconnect}",
    )


def roofline_calibration(
    model: ModelSpec,
    hardware: HardwareSpec,
    tensor_parallel: int = 1,
    eff: Efficiencies = DEFAULT_EFFICIENCIES,
) -> Calibration:
    """A `derived` calibration for hardware without measurements: every term from datasheet peaks."""
    knee, linear = linear_roofline(model, hardware, tensor_parallel, eff)
    terms = (
        linear
        + attention_terms(model, hardware, tensor_parallel, eff)
        + lm_head_terms(model, hardware, tensor_parallel, eff)
        + all_reduce_roofline(model, hardware, tensor_parallel)
        + host_terms()
    )
    return Calibration(
        name=f"{model.name}@{hardware.name}-tp{tensor_parallel}-roofline",
        label="derived",
        model=model,
        dtype=model.dtype,
        device=DeviceInfo.of_catalog(hardware, tensor_parallel),
        cost_model=CostModelFit(knee_tokens=knee, knee_label="derived", terms=terms),
        provenance=Provenance(
            source=f"{hardware.spec_source}",
            method="roofline",
            notes=[f"efficiencies: {eff.model_dump()}", "no measurement of this GPU was used"],
        ),
    )
