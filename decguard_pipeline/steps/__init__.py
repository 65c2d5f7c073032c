"""Orchestration steps the Dagster assets call: discover contracts and targets, run a target,
compute metrics and gates, write reports. Pure Python over core, backends and warehouse; no
Dagster import, so every step is testable on its own."""
