"""A new local instance killed while it is created (defs/instance_sqlite.py
``create_in_place``): the next opening must give a whole instance. Dagster creates its
databases statement by statement; killed in the middle, its next opening did not finish the
job (no dynamic partitions table: every later run failed)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from decguard_pipeline_tests.conftest import ROOT

# Opens a new instance, killing itself (SIGKILL) at its n-th SQL statement; n = 0: prints
# how many statements the opening took.
KILLED = textwrap.dedent(
    """
    import os, signal, sys
    import sqlalchemy as sa
    os.environ["DAGSTER_HOME"] = sys.argv[1]
    n, count = int(sys.argv[2]), [0]

    @sa.event.listens_for(sa.Engine, "before_cursor_execute")
    def each(*_args):
        count[0] += 1
        if count[0] == n:
            os.kill(os.getpid(), signal.SIGKILL)

    from decguard_pipeline.defs.instance import open_instance
    with open_instance():
        pass
    print(count[0])
    """
)

USE = textwrap.dedent(
    """
    import os, sys
    os.environ["DAGSTER_HOME"] = sys.argv[1]
    from decguard_pipeline.defs.instance import open_instance
    with open_instance() as instance:
        assert instance.get_runs(limit=1) == []
        instance.add_dynamic_partitions("days", ["2026-01-01"])
        assert instance.get_dynamic_partitions("days") == ["2026-01-01"]
        assert instance.all_instigator_state() == []
    print("ok")
    """
)


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    return subprocess.run(
        [sys.executable, "-c", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )


@pytest.mark.slow
def test_a_kill_at_any_statement_of_the_creation_leaves_an_instance_that_opens_whole(
    tmp_path: Path,
):
    done = _python(KILLED, str(tmp_path / "counted"), "0")
    assert done.returncode == 0, done.stderr
    total = int(done.stdout)
    assert total > 50  # schema, stamps and migrations of three databases
    for n in sorted({1, *range(total // 8, total, total // 8)}):
        home = tmp_path / f"killed-at-{n}"
        killed = _python(KILLED, str(home), str(n))
        assert killed.returncode == -9, f"statement {n}: {killed.stderr[-500:]}"
        used = _python(USE, str(home))
        assert used.returncode == 0 and used.stdout.strip() == "ok", (
            f"killed at statement {n} of {total}: {used.stderr[-800:]}"
        )
        assert not list(home.glob(".creating-*"))  # the killed creation's folder is gone
