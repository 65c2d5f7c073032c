"""Production checks as steps (issue 6): what the daily ``production_records`` and
``production_check`` assets call. No Dagster here.

A day's records come from ``<production dir>/<contract>/<YYYY-MM-DD>.jsonl`` (the directory is
``$DECGUARD_PRODUCTION``, default ``data/production`` under the project root) or, when there is
no such file, from the rows producers wrote to the warehouse table ``production_inbox`` for
that contract and day (:mod:`.sources`). They are checked exactly as ``decguard-pipeline check``
checks a records file (DecGuard's rules and messages) and stored normalised in
``production_records`` (:mod:`.ingest`).

``production_check`` measures the day's records as ingested: the columns the same run's
ingestion checked, else the stored records read back (never the source again: a rotated or
edited log cannot change what was ingested). It builds DecGuard's check report against the
baseline the contract's ``pipeline.production.baseline`` names (:mod:`.baseline`; by default
the newest earlier day with ingested records), writes the ``check_version`` 0.1 report file
and its sidecar, and stores metrics, drift, segments, extension results and checks
(:mod:`.check`). The report's ``dataset`` (and a previous day's ``baseline``) carry the
source's path and hash as ingested, so the report equals ``check CONTRACT --dataset DAYFILE
--baseline PREVDAYFILE`` apart from ``created_at``.

Which days exist and which one the daily schedule checks: :mod:`.schedule`. The rows written
are built by :mod:`decguard_pipeline.warehouse.rows.production`.
"""
