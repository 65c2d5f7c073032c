"""Imported last by the fork server (defs/fork_server.py ``FROZEN``), after everything
it preloads: those objects leave the cyclic collector for good (``gc.freeze``).

* Each forked worker's collections then skip Dagster's and the pipeline's modules (tens of
  thousands of objects), and never write to those shared pages (copy-on-write stays shared):
  Python's documented advice for a process that forks workers after its imports.
* The fork server's own exit, which the evaluation waits for, skips the final collections
  over them (~0.5 s of a 2-core machine)."""

from decguard_pipeline.core.collector import hold_for_life

hold_for_life()
