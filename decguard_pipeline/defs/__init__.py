"""Dagster wiring only: every asset and check body is a few lines over ``steps``."""
