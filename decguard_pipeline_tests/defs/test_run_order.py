"""The order in which `evaluate --workers N` hands items to its workers: the longest chains
of runs that cannot overlap first (defs/parallel.py ``first_the_long_chains``)."""

from decguard_pipeline.defs.limits import BACKEND_TAG
from decguard_pipeline.defs.parallel import Item, Run, first_the_long_chains


def _item(contract: str, key: str, after: set[int] = frozenset(), server: str | None = None):
    tags = {BACKEND_TAG: server} if server else {}
    return Item(contract, [Run(f"evaluate_{contract}", key, tags)], set(after))


def test_without_chains_or_durations_the_order_is_kept():
    items = [_item("a", "x"), _item("b", "y"), _item("c", "z")]
    assert first_the_long_chains(items) == [0, 1, 2]


def test_a_model_servers_runs_and_a_baselines_followers_go_first():
    items = [
        _item("guard", "default"),  # alone
        _item("refund", "default"),  # two targets wait for it
        _item("refund", "strong", after={1}),
        _item("refund", "order", after={1}),
        _item("tickets", "default", server="llm:80"),  # three runs on its server
        _item("tickets", "a", after={4}, server="llm:80"),
        _item("tickets", "b", after={4}, server="llm:80"),
    ]
    order = first_the_long_chains(items)
    # the server's 3 runs (its followers still wait for its default), then the baseline's
    # 2-run chain, then the rest in the given order
    assert order == [4, 5, 6, 1, 0, 2, 3]


def test_last_durations_put_a_long_run_first():
    items = [_item("spam", "default"), _item("guard", "default"), _item("sev", "default")]
    took = {("evaluate_guard", "default"): 6.0, ("evaluate_sev", "default"): 0.5}
    assert first_the_long_chains(items, took) == [1, 0, 2]
