"""The hardware catalog: what each accelerator people plan for can hold, move and compute, and what
an hour of it costs.

Figures are the vendors' published dense (non-sparse) peaks; prices are editable defaults with
their source and date, because contracts differ: pass a JSON file of overrides to `load_catalog`.
`spec` holds `HardwareSpec`, `builtin` the table, `catalog` the lookups (`load_catalog`,
`get_hardware`, `match_device`, `local_cpu`).
"""
