"""Live-vs-simulated validation: the live engine and the simulator on the same trace, the simulator's
error per metric and the live engine's noise floor beside it (`surgeplan validate`)."""
