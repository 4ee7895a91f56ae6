"""The what-if dashboard (Streamlit + Plotly): `surgeplan dashboard`, or `streamlit run dashboard/app.py`.

`app` holds the navigation, `views` one module per page (and the page table), `data` every call into
the simulator, planner and traces (cached by scenario), `charts` the pure Plotly builders, `widgets`
the inputs built from the scenario's own field definitions, `handoff` what one page sends another
(a trace, a calibration, the What-if scenario), `jobs` the background task behind the live validation.
"""
