"""The what-if dashboard (Streamlit + Plotly): `surgeplan dashboard`, or `streamlit run dashboard/app.py`.

`app` holds the navigation, `views` one module per page, `data` every call into the simulator and the
traces (cached by scenario), `charts` the pure Plotly builders, `widgets` the inputs built from the
scenario's own field definitions.
"""
