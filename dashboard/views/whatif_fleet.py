"""The What-if page's Fleet section (`fleet_inputs`): the GPU (with its catalog price), the model, the
engine profile, the tensor-parallel degree and an uploaded calibration, replicas and router, the
fused all-reduce threshold, and the autoscaler with its cold start. Apart from the rest of the
sidebar (`whatif_inputs`: traffic, scheduler settings, clients, SLO and price) so that each section
reads on one screen; every widget is keyed by the page's prefix, passed in.
"""

from __future__ import annotations

from dashboard import handoff, views
from dashboard import widgets as w
from dashboard.data import catalogs
from simulator.fleet_spec import AutoscalerSpec, ClusterSpec, ColdStart
from simulator.scenario import FusedAllReduce, HardwareChoice, ModelChoice, Scenario


def fleet_inputs(side, base: dict, key: str) -> None:
    """The Fleet section's widgets, each bound to its scenario field in `base` (nested scenario data,
    updated in place) and keyed `key` + its name."""
    cluster, scaler, hardware = base["cluster"], base["cluster"]["autoscaler"], base["hardware"]
    side.subheader("Fleet")
    catalog = catalogs.gpus()
    hardware["gpu"] = w.select(
        HardwareChoice,
        "gpu",
        hardware["gpu"],
        key + "gpu",
        "GPU",
        where=side,
        options=list(catalog),
        format_func=lambda n: f"{n}  (${catalog[n].price_usd_per_hour:.2f}/h)",
    )
    base["model"]["name"] = w.select(
        ModelChoice,
        "name",
        base["model"]["name"],
        key + "model",
        "model",
        where=side,
        options=catalogs.model_names(),
    )
    base["model"]["weight_dtype"] = w.select(
        ModelChoice,
        "weight_dtype",
        base["model"].get("weight_dtype", "auto"),
        key + "weight_dtype",
        "weight dtype",
        where=side,
    )
    profiles = catalogs.engine_profiles()
    base["engine_profile"] = w.select(
        Scenario,
        "engine_profile",
        base.get("engine_profile"),
        key + "engine_profile",
        "serving stack (engine profile)",
        where=side,
        options=[None, *profiles],
        format_func=lambda n: (
            "default for the calibration (vllm-v1 on GPUs)" if n is None else profiles[n]
        ),
    )
    uploaded = handoff.offered(handoff.CALIBRATION)
    if uploaded:
        hardware["calibration"] = w.select(
            HardwareChoice,
            "calibration",
            None,
            key + "calibration",
            "calibration",
            where=side,
            options=[None, uploaded["path"]],
            format_func=lambda p: (
                "best shipped for this model and GPU"
                if p is None
                else f"{uploaded['name']} ({uploaded['label']}, uploaded)"
            ),
        )
    left, right = side.columns(2)
    cluster["replicas"] = w.number(
        ClusterSpec,
        "replicas",
        cluster["replicas"],
        key + "replicas",
        "replicas at start",
        where=left,
    )
    hardware["tensor_parallel"] = w.number(
        HardwareChoice,
        "tensor_parallel",
        hardware["tensor_parallel"],
        key + "tp",
        "GPUs per replica",
        where=right,
    )
    tp = hardware["tensor_parallel"]
    fused_mib = w.number(
        FusedAllReduce,
        "mib",
        (hardware.get("fused_all_reduce_mb") or {}).get(tp),
        key + "fused_all_reduce",
        "fused all-reduce up to (MiB)",
        where=side,
        fmt="%.0f",
        placeholder="off",
    )
    hardware["fused_all_reduce_mb"] = {} if fused_mib is None else {tp: fused_mib}
    scaler["enabled"] = w.toggle(
        AutoscalerSpec,
        "enabled",
        scaler["enabled"],
        key + "autoscale",
        "autoscaler",
        where=side,
        help_extra="Scale out at KV usage ≥ 0.8 or ≥ 5 waiting per replica, after a cold start.",
    )
    scaler["min_replicas"] = cluster["replicas"]
    left, right = side.columns(2)
    scaler["max_replicas"] = w.number(
        AutoscalerSpec,
        "max_replicas",
        scaler["max_replicas"],
        key + "max_replicas",
        "max replicas",
        where=left,
    )
    cold = scaler["cold_start"]
    cold["provisioning_s"] = w.number(
        ColdStart,
        "provisioning_s",
        cold["provisioning_s"],
        key + "provisioning",
        "provisioning (s)",
        where=right,
        step=10.0,
        fmt="%.0f",
    )
    views.link("plan", "Plan it: cheapest fleet", where=side)
