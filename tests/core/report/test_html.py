"""The report's verdict in words, from literal metrics: comparisons, intervals, targets."""

from retailsim_core.report.html import markdown_summary
from retailsim_core.report.verdict import verdict_notes, verdict_rows, verdict_table


def metrics(world: tuple[float, float], *, oracle: bool = False) -> dict:
    def row(r20, ndcg):
        return {"R@20": r20, "NDCG@10": ndcg}

    methods = {"world_model": row(*world), "TIFU-KNN": row(0.39, 0.31)}
    methods |= {"world_model | given mission": row(0.42, 0.34)}
    methods |= {"Mission-P-TopFreq": row(0.44, 0.30)}
    if oracle:
        methods |= {"oracle (no mission)": row(0.50, 0.40), "oracle": row(0.60, 0.45)}
    return {"next_basket": {"all": methods, "test_96_104": methods}, "masked_item": {}}


def test_the_world_model_is_compared_with_every_honest_baseline_and_the_interval_is_shown():
    bounds = {"next_basket": {"test_96_104": {"TIFU-KNN": {"diff_R@20": [0.01, 0.03]}}}}
    rows = verdict_rows(metrics((0.4128, 0.3302)), bounds, "test_96_104")
    sl, model, rival, k, a, b, rel, ci, word = rows[0]
    assert (sl, model, rival, k, a, b, ci) == (
        "test_96_104",
        "world_model",
        "TIFU-KNN",
        "R@20",
        0.4128,
        0.39,
        [0.01, 0.03],
    )
    assert round(rel, 4) == 0.0585 and word == "better, interval above 0"
    assert rows[1][3] == "NDCG@10" and rows[1][7] is None and rows[1][8] == "better"
    # the conditional row only against its own baseline, and it loses on R@20 here
    assert rows[2][1:4] == ("world_model | given mission", "Mission-P-TopFreq", "R@20")
    assert rows[2][8] == "NOT better"
    assert not any(r[2] == "world_model | given mission" for r in rows)
    table = verdict_table(metrics((0.4128, 0.3302)), bounds, ["test_96_104", "all"])
    assert table.count("<tr>") == 1 + 2 * len(rows) and "[+0.0100, +0.0300]" in table


def test_real_lgsr_targets_are_judged_on_the_headline_slice_and_nowhere_else():
    notes = verdict_notes(metrics((0.4128, 0.3302)), "test_96_104", "lgsr")
    assert notes == [
        "[test_96_104] real-LGSR target R@20 >= 0.43: world_model 0.4128 (NOT MET, short by "
        "0.0172).",
        "[test_96_104] real-LGSR target NDCG@10 >= 0.35: world_model 0.3302 (NOT MET, short by "
        "0.0198).",
    ]
    met = verdict_notes(metrics((0.45, 0.36)), "test_96_104", "lgsr")
    assert met[0].endswith("0.4500 (met).") and met[1].endswith("0.3600 (met).")
    assert verdict_notes(metrics((0.45, 0.36)), "all", "lgsr") == []  # not the headline
    assert verdict_notes(metrics((0.4128, 0.3302)), "test_96_104", "completejourney") == []
    assert "NOT MET, short by 0.0172" in markdown_summary(metrics((0.4128, 0.3302)), "lgsr")
    assert "target" not in markdown_summary(metrics((0.4128, 0.3302)), "completejourney")


def test_no_real_data_target_where_planted_truth_is_known():
    notes = verdict_notes(metrics((0.4128, 0.3302), oracle=True), "test_96_104", "lgsr")
    assert notes == [
        "[test_96_104] world model reaches 82.6% of the honest ceiling's R@20 (oracle without "
        "the mission: 0.5000)."
    ]


def test_the_events_section_says_what_a_stand_in_cannot_show():
    from retailsim_core.report.price_sections import STAND_IN_CAVEAT, events_section

    method = {
        "products": 3,
        "events": 9,
        **{k: 0.5 for k in ("spearman", "calibration_slope", "mean_lift_ratio", "wape")},
        **{f"{k}_ci": [0.1, 0.9] for k in ("spearman", "calibration_slope", "mean_lift_ratio")},
        "wape_ci": [0.4, 0.6],
    }
    events = {
        "events": 9,
        "weeks": [96, 117],
        "fitted_weeks": [81, 95],
        "ceiling": {"split_half": 0.3, "ceiling": 0.68},
        "methods": {"world_model": method, "no_response": method},
        "world_model_vs": {"no_response": {"wape_difference": 0.0, "wape_difference_ci": [0, 0]}},
    }
    planted = "".join(events_section(events | {"source": "planted calendar"}))
    stand_in = "".join(events_section(events | {"source": "other stores (leave-one-store-out)"}))
    assert "0.680" in planted and STAND_IN_CAVEAT not in planted
    assert STAND_IN_CAVEAT in stand_in
    assert events_section({"events": 0}) == []
    assert "planted demand" not in planted  # no truth bound: no planted table
    truth = {"mean_lift": 0.0364, "methods": {"world_model": method | {"mean_lift_ratio": 0.7}}}
    with_truth = "".join(events_section(events | {"source": "planted calendar", "planted": truth}))
    assert "Against the planted demand" in with_truth and "0.036" in with_truth
    assert with_truth.count("<table>") == planted.count("<table>") + 1
    assert "0.700" in with_truth  # the world model's mean-lift ratio against the planted lift


def test_the_events_section_says_which_targets_are_met():
    from retailsim_core.report.price_sections import event_verdict

    def method(spearman, low, slope):
        return {"spearman": spearman, "spearman_ci": [low, 0.9], "calibration_slope": slope}

    def events(wm, diff_ci, planted=None):
        return {
            "methods": {"world_model": wm},
            "ceiling": {"ceiling": 0.51},
            "world_model_vs": {
                "hierarchical_loglog": {"wape_difference": -0.1, "wape_difference_ci": diff_ci}
            },
            "planted": planted,
        }

    good = event_verdict(events(method(0.6, 0.4, 1.0), [-0.2, -0.05]))
    assert good.count("<b>met</b>") == 3 and "NOT MET" not in good
    bad = event_verdict(events(method(0.216, 0.2, 0.75), [-0.2, 0.01]))
    assert bad.count("NOT MET") == 3 and "0.216 [0.200, 0.900]" in bad and "0.510" in bad
    high_low_end = event_verdict(events(method(0.55, 0.3, 1.0), [-0.2, -0.05]))
    assert high_low_end.count("NOT MET") == 1  # the point is above 0.5, the interval is not
    truth = {"methods": {"world_model": {"mean_lift_ratio": 1.03}}}
    assert event_verdict(events(method(0.6, 0.4, 1.0), [-0.2, -0.05], truth)).count("met") == 4
    truth = {"methods": {"world_model": {"mean_lift_ratio": 0.70}}}
    assert "NOT MET</b> (0.700)" in event_verdict(events(method(0.6, 0.4, 1.0), [-1, -0.1], truth))


def test_a_budget_limited_sequential_baseline_is_said_to_be_one():
    from retailsim_core.report.intro import _budget_line, _coverage_line

    tuning = {
        "SASRec": {"stopped_by": "time budget", "epochs": 1, "seconds": 46.3, "best_epoch": 1},
        "BERT4Rec": {"stopped_by": "patience", "epochs": 9, "seconds": 300.0, "best_epoch": 6},
    }
    (line,) = _budget_line(tuning)
    assert "SASRec is budget-limited: 1 epoch(s) in 46 s" in line and "BERT4Rec" not in line
    assert _budget_line({"SASRec": {"stopped_by": "patience"}}) == []
    coverage = {
        "vocabulary": 3,
        "purchase_share": 0.6,
        "products_covered": 2,
        "products": 4,
        "purchases": 5,
    }
    (text,) = _coverage_line(coverage)
    assert "names 60.0% of the test baskets' purchases and 2 of the 4 products" in text
