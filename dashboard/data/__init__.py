"""The dashboard's only door to the simulator and the traces: every call, every file read, every cache.

Pages build a `Scenario` from widgets and ask here for results, one module per kind of question
(scenarios and simulations, catalogs, trace files, plans, the live validation, saved result files).
Errors a user can cause (a model that does not fit the GPU, a bad trace file) come back as one-line
messages for `st.error`, never as exceptions.
"""
