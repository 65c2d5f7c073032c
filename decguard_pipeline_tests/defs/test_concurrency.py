"""Two evaluations of different partitions in separate processes, while a third process
holds the DuckDB catalog open read-only: all succeed and every row is there."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.conftest import EXAMPLES

WRITER = textwrap.dedent(
    """
    import sys, warnings
    import dagster as dg
    warnings.filterwarnings("ignore")
    from decguard_pipeline.definitions import build_definitions
    from decguard_pipeline.steps.contracts import discover_contracts
    contracts, root, target = sys.argv[1:4]
    entries = discover_contracts(contracts)
    defs = build_definitions(entries, warehouse_root=root)
    with dg.DagsterInstance.get() as instance:
        instance.add_dynamic_partitions("refund_targets", [target])
        result = defs.resolve_job_def("evaluate_refund").execute_in_process(
            instance=instance, partition_key=target, raise_on_error=False,
            run_config={"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}})
    sys.exit(0 if result.success else 3)
    """
)

READER = textwrap.dedent(
    """
    import sys, contextlib
    from decguard_pipeline.warehouse import Warehouse
    stack = contextlib.ExitStack()  # open until the process ends
    con = stack.enter_context(Warehouse(sys.argv[1]).read_only())
    print(con.execute("SELECT count(*) FROM case_results").fetchone()[0], flush=True)
    sys.stdin.readline()  # hold the catalog open until the writers are done
    rows = con.execute(
        "SELECT target, count(*) FROM latest_case_results GROUP BY target ORDER BY target"
    ).fetchall()
    print(rows, flush=True)
    """
)


def test_parallel_writers_with_a_reader_holding_the_catalog(tmp_path: Path):
    wh = Warehouse(tmp_path / "wh")
    wh.query("SELECT 1")  # the catalog exists
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "home")}
    (tmp_path / "home").mkdir()
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(wh.root)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    assert reader.stdout is not None and reader.stdin is not None
    assert reader.stdout.readline().strip() == "0"
    # the instance exists before runs start, as with `make run` or `dagster dev`: two
    # processes creating a fresh SQLite instance at the same moment would race on its schema
    subprocess.run(
        [sys.executable, "-c", "import dagster; dagster.DagsterInstance.get().get_runs()"],
        env=env,
        check=True,
    )
    targets = ["default@refund-mock-v1", "order_sensitive@refund-mock-v2"]
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(EXAMPLES), str(wh.root), target],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for target in targets
    ]
    outputs = [w.communicate(timeout=240)[1] for w in writers]
    codes = [w.returncode for w in writers]
    # refund default passes every gate; order_sensitive fails max_ece: a verdict, so its run
    # succeeds too, with its case results and metrics
    assert codes == [0, 0], outputs
    reader.stdin.write("\n")
    reader.stdin.flush()
    seen = reader.stdout.readline().strip()
    assert reader.wait(timeout=30) == 0
    assert seen == str([(t, 11) for t in sorted(targets)])
    metrics = wh.query(
        "SELECT target, value FROM latest_metrics WHERE metric = 'total' ORDER BY target"
    ).to_pylist()
    assert metrics == [{"target": t, "value": 11.0} for t in sorted(targets)]
