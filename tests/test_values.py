from perfci.analysis.values import per_step_ns
from perfci.model import Metric, MetricKind


def test_step_value_leaves_warmup_out() -> None:
    step = Metric(MetricKind.STEP, "Train step", samples_ns=[8.15e9, 1.0e9, 1.2e9], warmup=1)
    assert per_step_ns(step, 3) == 1.1e9


def test_totals_are_divided_by_steps() -> None:
    kernel = Metric(MetricKind.KERNEL, "k", calls=12, total_ns=600.0)
    assert per_step_ns(kernel, 3) == 200.0
    assert per_step_ns(kernel, None) == 600.0
    assert per_step_ns(Metric(MetricKind.KERNEL, "k", calls=4, avg_ns=5.0), 2) == 10.0
    assert per_step_ns(Metric(MetricKind.KERNEL, "k"), 2) is None
