"""The training-memory benchmark names the phase each training log line closes."""

from benchmarks.bench_training_memory import phase_of


def test_each_log_line_closes_its_phase():
    lines = [
        "start",
        "trip store: 10 trips; 5 samples",
        "shelf: 3 store-weeks, 9 cells",
        "tensors: 4 training / 1 validation samples in 0.1s; vocabulary 9 products",
        "own-depth responses start at the training weeks' (median 0.10)",
        "plan responses start at the training weeks' lifts (median [0.1 0.2])",
        "  epoch 1 (warmup) batch 0/10 loss 9.0000",
        "  epoch 1 (warmup) batch 100/10 loss 8.0000",
        "epoch 1 (warmup): valid_recall@20 0.1000",
        "size head calibrated on validation baskets: {}",
        "done: 4 training samples, 1 epochs",
    ]
    seen: set[str] = set()
    phases = []
    for line in lines:
        phases.append(phase_of(line, seen))
        seen.add(phases[-1])
    assert phases == [
        "start",
        "trip store",
        "shelf and T4 rows",
        "training sets built",
        "response priors",
        "response priors",
        "to the first batch (popularity, scaling)",
        "training (batches)",
        "training (batches)",
        "size calibration",
        "checkpoint written",
    ]
    assert phase_of("something new", seen) == "other"


def test_the_monitor_keeps_each_line_and_its_phase_peaks():
    """``bench_evaluation_memory`` reads the marks; the training benchmark the phases."""
    from benchmarks.bench_training_memory import RssMonitor

    lines = ["start", "trip store: 1 trips", "  epoch 1 (warm-up) batch 0/1 loss 1.0"]
    monitor = RssMonitor(every=0.01)
    for line in lines:
        monitor.mark(line)
    assert [message for message, _ in monitor.marks] == lines
    first_batch = "to the first batch (popularity, scaling)"
    assert list(monitor.phases) == ["start", "trip store", first_batch]
    assert all(rss > 0 and anon > 0 for rss, anon in monitor.phases.values())
