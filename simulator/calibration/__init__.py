"""Step-cost calibration: the calibration file schema, the cost model and its fitting, the roofline
estimate, the importer of public operator tables, the shipped calibrations, and the profiler (the one
place that runs the live engine, lazily)."""
