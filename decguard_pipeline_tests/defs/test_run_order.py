"""The order of `evaluate`'s runs: the longest chains of runs that cannot overlap first, given
to Dagster's executor as each op's ``dagster/priority`` tag (``--workers N``) or followed one
after the other (``--workers 1``), each item after those it waits for
(defs/evaluation_job.py ``priorities``, ``in_order``)."""

from decguard_pipeline.defs.evaluation_job import (
    PRIORITY_TAG,
    Item,
    Plan,
    Run,
    build_job,
    in_order,
    op_name,
    priorities,
)
from decguard_pipeline.defs.limits import BACKEND_TAG


def _item(contract: str, key: str, after: set[int] = frozenset(), server: str | None = None):
    tags = {BACKEND_TAG: server} if server else {}
    return Item(contract, [Run(f"evaluate_{contract}", key, tags)], set(after))


def _order(ranks: list[int]) -> list[int]:
    return sorted(range(len(ranks)), key=lambda i: -ranks[i])


def test_without_chains_the_order_is_kept():
    items = [_item("a", "x"), _item("b", "y"), _item("c", "z")]
    assert _order(priorities(items)) == [0, 1, 2]


SCENARIO = [
    _item("guard", "default"),  # alone
    _item("refund", "default"),  # two targets wait for it
    _item("refund", "strong", after={1}),
    _item("refund", "order", after={1}),
    _item("tickets", "default", server="llm:80"),  # three runs on its server
    _item("tickets", "a", after={4}, server="llm:80"),
    _item("tickets", "b", after={4}, server="llm:80"),
]


def test_a_model_servers_runs_and_a_baselines_followers_go_first():
    # the server's 3 runs (its followers still wait for its default), then the baseline's
    # 2-run chain, then the rest in the given order
    assert _order(priorities(SCENARIO)) == [4, 5, 6, 1, 0, 2, 3]


def test_one_at_a_time_each_item_comes_after_what_it_waits_for():
    # 5 and 6 rank first but wait for 4; 2 and 3 wait for 1
    assert in_order(SCENARIO) == [4, 5, 6, 1, 0, 2, 3]
    backwards = [_item("x", "b", after={1}), _item("x", "a"), _item("y", "c")]
    assert in_order(backwards) == [1, 0, 2]


def test_the_job_has_one_op_per_item_with_its_priority_server_and_dependencies():
    plan = Plan([i.to_json() for i in SCENARIO], 2, None, "/wh", [], "", 1)
    job = build_job(plan)
    ranks = priorities(SCENARIO)
    names = [op_name(i, item) for i, item in enumerate(SCENARIO)]
    assert sorted(n.name for n in job.graph.nodes) == sorted(names)
    waits = {
        invocation.name: {d.node for d in inputs.values()}
        for invocation, inputs in job.graph.dependencies.items()
    }
    for index, item in enumerate(SCENARIO):
        node = job.graph.node_named(names[index])
        assert node.tags[PRIORITY_TAG] == str(ranks[index])
        assert node.tags.get(BACKEND_TAG) == item.tags.get(BACKEND_TAG)
        assert waits.get(names[index], set()) == {names[j] for j in item.after}
