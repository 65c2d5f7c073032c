"""One evaluation, no Dagster and no warehouse: load a contract, call the backend, build the
report. What the CLI, the SDK and the Dagster steps call (golden.py: test; guard.py: the guard
extension around it; properties/: fuzz and replay)."""
