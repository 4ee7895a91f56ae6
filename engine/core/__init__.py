"""The engine's pure-Python core, shared by the live engine and the simulator: request state, sampling
parameters, cache and scheduler settings, the block manager, the scheduler and the step shape. Never
imports torch (tests/test_layout.py asserts it)."""
