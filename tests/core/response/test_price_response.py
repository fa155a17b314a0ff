"""The simulation check in chunks: the real baskets' figures do not depend on the chunking, and
one chunk of every context draws what an unchunked check draws."""

import numpy as np


def test_the_simulation_check_in_chunks_keeps_the_real_figures(tiny_warehouse, tiny_checkpoint):
    from retailsim_core.next_basket.eval_config import EvalConfig
    from retailsim_core.pipeline.evaluation_run import load_tasks
    from retailsim_core.pipeline.readers.price_reader import read_price_features
    from retailsim_core.response.price_response import simulation_check

    wh, split = tiny_warehouse["warehouse"], tiny_warehouse["split"]
    tasks = load_tasks(wh, split, EvalConfig(), tiny_checkpoint)
    rows = tasks.test_rows[:40]
    samples = tasks.samples[rows]
    stores, weeks = samples["store_id"].to_list(), samples["week"].to_list()
    prices = read_price_features(wh, sorted(set(weeks)), stores=sorted(set(stores)))

    def check(chunk):
        return simulation_check(tasks.model, tasks.data, rows, prices, stores, weeks, 3, chunk)

    whole, one, parts = check(None), check(len(rows)), check(7)
    assert one == whole  # one chunk draws as the unchunked check
    real = ("baskets", "real_mean_size", "real_repeat_share")
    assert {k: parts["summary"][k] for k in real} == {k: whole["summary"][k] for k in real}
    assert parts["sizes"]["real"] == whole["sizes"]["real"]
    assert sum(parts["sizes"]["simulated"]) == len(rows)
    assert 0 < parts["summary"]["simulated_mean_size"] and np.isfinite(
        parts["summary"]["size_total_variation"]
    )
