"""Production checks (``check``, spec §11): records collected after deployment, checked
against a contract's post-deployment gates, a baseline and metadata segments.

Entry points: :func:`.check.run_check` (a records file or an Arrow table, optional baseline)
returning a :class:`.report.ProductionReport`; :func:`.loader.load_records` /
:func:`.loader.load_table` for the columns alone; :func:`.verify.load_production_report` to
read and verify a stored report, :func:`.verify_stream.verify_report` to verify one a block
at a time. :mod:`.record_text` and :mod:`.object_text` write normalised records as JSON text
column-wise (what the pipeline stores and reports). The settings of the extensions are a
contract section (:mod:`decguard_pipeline.core.contract.production`).
"""
