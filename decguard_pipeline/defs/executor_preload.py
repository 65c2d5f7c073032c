"""Imported by the fork server of ``evaluate --workers N`` (Dagster's multiprocess executor,
``preload_modules``; defs/evaluation_job.py) after the pipeline: it opens and closes the
instance once, so that the classes of its storages, their migrations (alembic) and its log
manager are imported there, once, and not again in every op's process (~0.5 s each on an idle
2-core machine, 4 s under load); and it builds the evaluation's definitions, which every op
process then has from its fork."""

import dagster as dg

from decguard_pipeline.defs.evaluation_job import preload_definitions

with dg.DagsterInstance.get():
    pass
preload_definitions()
