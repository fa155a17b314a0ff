def test_the_phases_are_summed_into_the_evaluations_stages():
    from benchmarks.bench_evaluation_memory import stages

    marks = [
        ("start", 0.0, 100.0),
        ("no mission labels in the source", 30.0, 2_000.0),
        ("evaluated 136/272 samples", 10.0, 3_000.0),
        ("evaluated 272/272 samples", 12.0, 2_500.0),
        ("evaluated 5/5 samples", 1.0, 2_400.0),  # the cold-start rows: the same stage
        ("elasticities for 256 contexts; simulation check", 50.0, 4_000.0),
        ("promotion events (planted calendar): 10 events", 70.0, 3_500.0),
    ]
    rows = stages(marks)
    assert [r[0] for r in rows] == [
        "start",
        "no mission labels in the source",
        "scoring: every method, in chunks",
        "price checks: elasticities, simulation, held-out response",
        "promotion-event check",
    ]
    assert rows[2][1:] == [23.0, 3_000.0]  # seconds summed, the peak the largest
    assert rows[4][1:] == [70.0, 3_500.0]
