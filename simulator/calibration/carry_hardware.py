"""Carrying a measured calibration to a GPU nobody measured it on, by datasheet ratios.

A calibration fitted on one GPU's kernel timings says how long each term takes there. On another GPU of
the catalog, a memory-bound term scales by the HBM bandwidth ratio, a compute-bound one by the dense peak
ratio of the calibration's dtype, an all-reduce by the interconnect ratio; host and latency terms keep
their time (the datasheet says nothing about them). Every carried figure is labelled `derived` and names
the ratio it was carried by, so `calibrations show` tells a carried term from a measured one.
"""

from simulator.calibration.schema import Calibration, CostModelFit, CostTerm, DeviceInfo, Provenance
from simulator.hardware.spec import HardwareSpec


def scale_factor(bound: str, source: HardwareSpec, target: HardwareSpec, dtype: str) -> float:
    """How much longer a term bound by `bound` takes on `target` than on `source`."""
    if bound == "memory":
        return source.memory_bandwidth_bytes_per_s / target.memory_bandwidth_bytes_per_s
    if bound == "compute":
        return source.peak_flops(dtype) / target.peak_flops(dtype)
    if bound == "network":
        return source.interconnect_bandwidth_bytes_per_s / target.interconnect_bandwidth_bytes_per_s
    return 1.0  # host and latency terms do not follow the datasheet


def derive_for_hardware(
    calibration: Calibration, source: HardwareSpec, target: HardwareSpec
) -> Calibration:
    """Carry a calibration to other hardware: memory-bound terms by the bandwidth ratio,
    compute-bound ones by the compute ratio; the knee moves so the weight-read floor follows
    bandwidth. Every carried number becomes `derived`."""
    fit = _require_fit(calibration)
    dtype = calibration.dtype
    memory_ratio = scale_factor("memory", source, target, dtype)
    compute_ratio = scale_factor("compute", source, target, dtype)
    terms = [
        _carried(term, source, scale_factor(term.bound, source, target, dtype))
        for term in fit.terms
    ]
    # The weight-read floor (compute time per token × knee) must follow bandwidth, not compute
    moved = fit.with_floor_moved(memory_ratio, compute_ratio)
    return calibration.model_copy(
        update={
            "name": calibration.name.replace(source.name, target.name),
            "label": "derived",
            "device": DeviceInfo.of_catalog(target, calibration.device.tensor_parallel),
            "cost_model": CostModelFit(
                knee_tokens=moved.knee_tokens,
                knee_label="derived",
                tile_tokens=moved.tile_tokens,
                terms=terms,
                spill_tokens=fit.spill_tokens,
                gemm_switch_tokens=fit.gemm_switch_tokens,
                fit_errors=fit.fit_errors,
                all_reduce_curve=fit.all_reduce_curve,  # its term scaled like the others
            ),
            "provenance": Provenance(
                source=f"{calibration.provenance.source}; {target.spec_source}",
                method=f"derived from {source.name} by datasheet ratios",
                notes=[
                    f"memory-bound terms × {memory_ratio:.3f} (bandwidth ratio)",
                    f"compute-bound terms × {compute_ratio:.3f} (dense {dtype} peak ratio)",
                    "fit errors are those of the source calibration on its public table",
                    *calibration.provenance.notes,
                ],
            ),
            "points": [],
        }
    )


def _carried(term: CostTerm, source: HardwareSpec, factor: float) -> CostTerm:
    return term.model_copy(
        update={
            "seconds_per_unit": term.seconds_per_unit * factor,
            "label": "derived",
            "note": f"{term.label} on {source.name} × {factor:.3f} ({term.bound}-bound); {term.note}".rstrip(
                "; "
            ),
        }
    )


def _require_fit(calibration: Calibration) -> CostModelFit:
    if calibration.cost_model is None:
        raise ValueError(f"calibration {calibration.name!r} has no cost model to derive from")
    return calibration.cost_model
