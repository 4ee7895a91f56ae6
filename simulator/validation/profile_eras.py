"""The kernel-era parts of an engine profile a fit writes: per GPU, the era scales derived afresh
from the shipped calibrations (`with_era_scales`), and per published set the GPUs on which its stack
ran the tables' own GEMMs or an older era (`with_source_era`, `with_older_eras`). Apart from
`profile_fit` (the search) because these only rewrite a profile's era fields."""

from __future__ import annotations

from simulator.calibration.engine_profile import EngineProfile, SourceEra
from simulator.calibration.kernel_era import era_factor, era_source
from simulator.calibration.shipped import load_all_shipped


def with_source_era(
    profile: EngineProfile, name: str, tables_gpus: tuple[str, ...], why: str
) -> EngineProfile:
    """The profile with set `name`'s GPUs that ran the tables' own GEMMs (`tables_gpus`), its
    older-era GPUs kept, and `why` as the reason (the kept one where empty)."""
    eras = {key: value for key, value in profile.source_eras.items() if key != name}
    kept = profile.source_eras.get(name)
    older = kept.older_gpus if kept else []
    if tables_gpus or older:
        eras[name] = SourceEra(
            tables_gpus=list(tables_gpus),
            older_gpus=older,
            source=why or (kept.source if kept else ""),
        )
    return profile.model_copy(update={"source_eras": eras})


def with_older_eras(
    profile: EngineProfile, older_gpus: dict[str, list[str]], why: dict[str, str]
) -> EngineProfile:
    """The profile with, per set, the GPUs on which its stack ran the older era (`older_gpus`)."""
    eras = dict(profile.source_eras)
    for name, gpus in older_gpus.items():
        kept = eras.get(name)
        tables = kept.tables_gpus if kept else []
        if gpus or tables:
            source = why.get(name, "").rstrip("; ") or (kept.source if kept else "")
            eras[name] = SourceEra(tables_gpus=tables, older_gpus=gpus, source=source)
        else:
            eras.pop(name, None)
    return profile.model_copy(update={"source_eras": eras})


def with_era_scales(profile: EngineProfile) -> EngineProfile:
    """The profile with its per-GPU era scales (`kernel_era`: the era it stands for and an older
    one) derived afresh from the shipped calibrations, for the GPUs it already names (a profile
    naming none is left as it is)."""
    if not (profile.kernel_era_scales or profile.older_era_scales):
        return profile
    calibrations = load_all_shipped()
    backend = profile.kernel_backend or "vllm"
    update = {}
    for field in ("kernel_era", "older_era"):
        gpus = getattr(profile, f"{field}_scales")
        if gpus:
            scales = {gpu: era_factor(calibrations, gpu, backend) for gpu in gpus}
            update[f"{field}_scales"] = {gpu: round(s, 4) for gpu, s in scales.items() if s}
            update[f"{field}_source"] = "; ".join(
                f"{gpu}: {era_source(calibrations, gpu, backend)}" for gpu in scales
            )
    return profile.model_copy(update=update)


__all__ = ["with_era_scales", "with_older_eras", "with_source_era"]
