"""Split page: co-located vs disaggregated prefill/decode through the spike, long-context surge included,
on the same traffic; the host KV tier on both. Fixed fleets; `surgeplan plan-split` searches the ratios."""

from __future__ import annotations

import streamlit as st

from dashboard.charts.timeline import split_lines
from dashboard.data import scenarios
from simulator.fleet_spec import DisaggregationSpec


def _metrics(column, name: str, result) -> None:
    summary = result.summary
    column.subheader(name)
    column.metric(
        "P99 TTFT", f"{summary.ttft_p99_s:.2f} s" if summary.ttft_p99_s is not None else "n/a"
    )
    column.metric(
        "P99 TPOT",
        f"{summary.tpot_p99_s * 1000:.0f} ms" if summary.tpot_p99_s is not None else "n/a",
    )
    column.metric("GPU-hours", f"{summary.gpu_hours:.2f}")
    column.metric("cost per request", f"${summary.cost_per_request_usd or 0:.4f}")
    column.metric("SLO", "met" if summary.meets_slo else "missed")
    if summary.kv_transfer_p99_s is not None:
        column.caption(
            f"KV moved: {summary.kv_transfer_bytes / 1e9:,.1f} GB, P99 transfer "
            f"{summary.kv_transfer_p99_s * 1000:.1f} ms"
        )
    if summary.prefix_hit_rate_cpu:
        column.caption(f"host KV tier hit rate {summary.prefix_hit_rate_cpu:.1%}")


def render() -> None:
    st.title("Co-located vs disaggregated prefill/decode")
    base = scenarios.default_split()
    spec = base.cluster.disaggregation
    st.caption(
        f"{base.model.name} on {base.hardware.gpu}, TP{base.hardware.tensor_parallel}; KV over "
        f"{spec.link}. Same traffic on both fleets: a {base.traffic.arrivals.multiplier:g}x spike with a "
        "long-context surge laid over it. Fixed fleets; `surgeplan plan-split` searches xPyD and TP."
    )
    left, middle, right = st.columns(3)
    prefill = left.slider("prefill replicas", 1, 8, spec.prefill_replicas, key="split_prefill")
    decode = left.slider("decode replicas", 1, 8, spec.decode_replicas, key="split_decode")
    colocated_replicas = middle.slider(
        "co-located replicas",
        1,
        16,
        spec.prefill_replicas + spec.decode_replicas,
        key="split_colocated",
    )
    long_rate = middle.slider(
        "long-context requests/s",
        0.0,
        2.0,
        float(base.traffic.parts[0].arrivals.rate_per_s),
        0.1,
        key="split_long",
    )
    gpus = scenarios.gpu_names()
    prefill_gpu = right.selectbox(
        "prefill GPU",
        gpus,
        gpus.index(spec.prefill.gpu or base.hardware.gpu),
        key="split_prefill_gpu",
    )
    decode_gpu = right.selectbox(
        "decode GPU",
        gpus,
        gpus.index(spec.decode.gpu or base.hardware.gpu),
        key="split_decode_gpu",
    )
    cpu_kv_gb = right.select_slider(
        "host KV tier per replica (GB)", [0, 64, 256, 512], 0, key="split_cpu_kv"
    )
    mixed_pool = right.checkbox(
        "Splitwise mixed pool on the split",
        spec.mixed_pool,
        help=DisaggregationSpec.model_fields["mixed_pool"].description,
        key="split_mixed_pool",
    )
    duration_s = right.slider(
        "traffic (s)",
        60,
        int(base.traffic.duration_s),
        int(base.traffic.duration_s),
        60,
        key="split_duration",
    )
    with st.spinner("simulating both fleets"):
        colocated, split, error = scenarios.split_pair(
            base,
            prefill,
            decode,
            colocated_replicas,
            long_rate,
            cpu_kv_gb,
            float(duration_s),
            prefill_gpu,
            decode_gpu,
            mixed_pool,
        )
    if error:
        st.error(error)
        return
    tp = base.hardware.tensor_parallel
    one, two = st.columns(2)
    _metrics(one, f"co-located: {colocated_replicas * tp} x {base.hardware.gpu}", colocated)
    pools = split.facts["disaggregation"]
    _metrics(
        two,
        f"disaggregated {prefill}P{decode}D: "
        f"{prefill * pools['prefill_tensor_parallel']} x {pools['prefill_gpu']} prefill + "
        f"{decode * pools['decode_tensor_parallel']} x {pools['decode_gpu']} decode",
        split,
    )
    two.caption(
        f"each pool at its GPU's catalog price: prefill ${pools['prefill_price_usd_per_gpu_hour']:.2f}, "
        f"decode ${pools['decode_price_usd_per_gpu_hour']:.2f} per GPU-hour"
    )
    if mixed_pool:
        summary = split.summary
        two.caption(
            f"mixed pool: {summary.mixed_pool_moves} machine moves, "
            f"{summary.mixed_pool_whole_requests} requests served whole on a decode replica, "
            f"{summary.mixed_pool_kept_requests} decoded on their prefill replica"
        )
    st.plotly_chart(split_lines(colocated, split), use_container_width=True)
