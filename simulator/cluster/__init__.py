"""The SimPy cluster: replicas that run the engine's own scheduler timed by the cost model, the
router, the autoscaler with cold starts, clients with timeouts and retries, and the time series."""
