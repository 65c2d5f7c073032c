"""A synthetic warehouse history: evaluations of a few awkwardly named partitions spread over
past days, written through the real write path (compaction tests and their child processes).
Each evaluation ends with its verdict, as the pipeline's do, but for the killed ones."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from decguard_pipeline.warehouse import Warehouse

# awkward names the folder encoding changes (space, slash, equals, percent, non-ASCII, a date)
PARTITIONS = [("a b/c=%", "x y@1/é"), ("2026-01-02", "123"), ("refund", "default@mock-v1")]


def write_evaluation(
    wh: Warehouse,
    contract: str,
    target: str,
    run: str,
    at: datetime,
    k: int,
    *,
    verdict: bool = True,
):
    """What an evaluation writes, in one transaction; with ``verdict=False``, what one
    killed before its verdict left."""
    with wh.transaction():
        _write_evaluation(wh, contract, target, run, at, k, verdict=verdict)


def _write_evaluation(
    wh: Warehouse, contract: str, target: str, run: str, at: datetime, k: int, *, verdict: bool
) -> None:
    base = {"contract": contract, "target": target, "run_id": run, "recorded_at": at}
    wh.write(
        "metrics",
        [{**base, "metric": m, "value": k + i / 10} for i, m in enumerate(["accuracy", "ece"])],
        contract=contract, target=target, run_id=run, recorded_at=at,
    )  # fmt: skip
    cases = [
        {**base, "position": i, "case_id": f"{run}-{i}", "labels": ["a", "b"],
         "probs": [0.6, 0.4], "probabilities": [("a", 0.6), ("b", 0.4)], "selected": "a",
         "input_text": f"case {i} of {run}"}
        for i in range(4)
    ]  # fmt: skip
    wh.write("case_results", cases, contract=contract, target=target, run_id=run, recorded_at=at)
    gates = [
        {**base, "source": "golden", "gate": "min_accuracy", "level": "requirement",
         "status": "pass" if k % 3 else "fail", "value": float(k)}
    ]  # fmt: skip
    wh.write("gate_results", gates, contract=contract, target=target, run_id=run, recorded_at=at)
    run_row = {**base, "backend": target.split("@")[0], "model_version": "v1", "n_cases": 4}
    wh.write("runs", [run_row], contract=contract, target=target, run_id=run, recorded_at=at)
    if k % 10 == 0:
        row = {**base, "backend": "default", "provider": "mock", "model_version": f"v{k}"}
        wh.write("targets", [row], contract=contract, target=target, run_id=run, recorded_at=at)
    if k % 15 == 0:
        row = {"contract": contract, "target": "_", "run_id": run, "recorded_at": at,
               "position": 0, "case_id": "c0", "input_text": "x"}  # fmt: skip
        wh.write("cases", [row], contract=contract, run_id=run, recorded_at=at)
    if verdict:
        row = {**base, "evaluation_run_id": run, "status": "pass" if k % 3 else "fail"}
        wh.write("verdicts", [row], contract=contract, target=target, run_id=run, recorded_at=at)


def fill_history(
    wh: Warehouse, *, days: float = 80, writes: int = 40, today: datetime | None = None
) -> list[str]:
    """``writes`` evaluations of every partition spread over the ``days`` days before
    ``today`` (now when not given); returns the run ids. In the first partition, the
    newest evaluation and one every ten were killed before their verdict (the views show the
    newest of the others)."""
    start = (today or datetime.now(UTC)) - timedelta(days=days)
    runs = []
    for k in range(writes):
        at = start + timedelta(days=days * k / writes)
        run = f"run-{k}"
        runs.append(run)
        for i, (contract, target) in enumerate(PARTITIONS):
            killed = i == 0 and (k % 10 == 7 or k == writes - 1)
            write_evaluation(wh, contract, target, run, at, k, verdict=not killed)
    # a run that wrote a partition twice (a retried step): only its newer file counts as its
    contract, target = PARTITIONS[0]
    again = start + timedelta(days=days * 5 / writes, hours=1)
    write_evaluation(wh, contract, target, "run-5", again, 99)
    for day in range(3):  # production_inbox: batches of a day, read in file order
        for batch in range(2):
            rows = [{"contract": "refund", "target": f"2026-03-0{day + 1}", "run_id": f"b{batch}",
                     "position": i, "id": f"r{batch}-{i}"} for i in range(3)]  # fmt: skip
            at = start + timedelta(days=day, minutes=batch)
            wh.write("production_inbox", rows, contract="refund", target=f"2026-03-0{day + 1}",
                     run_id=f"b{batch}", recorded_at=at)  # fmt: skip
    return runs
