"""Guard metrics (pipeline.guard and friends): calibration summary, risk-coverage, suites,
partial runs, their gates, the sidecar section and the text the CLI prints."""
