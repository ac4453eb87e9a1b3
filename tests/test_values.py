from perfci.analysis.values import PerStep, compared_value, per_step_ns
from perfci.core.model import Metric, MetricKind


def test_step_value_leaves_warmup_out() -> None:
    step = Metric(MetricKind.STEP, "Train step", samples_ns=[8.15e9, 1.0e9, 1.2e9], warmup=1)
    assert per_step_ns(step, 3) == 1.1e9


def test_totals_are_divided_by_steps() -> None:
    kernel = Metric(MetricKind.KERNEL, "k", calls=12, total_ns=600.0)
    assert per_step_ns(kernel, 3) == 200.0
    assert per_step_ns(kernel, None) == 600.0
    assert per_step_ns(Metric(MetricKind.KERNEL, "k", calls=4, avg_ns=5.0), 2) == 10.0
    assert per_step_ns(Metric(MetricKind.KERNEL, "k"), 2) is None


def test_fastest_step_is_the_smallest_per_step_total_where_the_source_gives_them() -> None:
    op = Metric(
        MetricKind.OP, "aten::addmm", calls=8, total_ns=10e6, step_totals_ns=[3e6, 2e6, 5e6]
    )
    assert compared_value(op, 3) == 10e6 / 3  # the mean, as the store keeps it
    assert compared_value(op, 3, PerStep.FASTEST) == 2e6
    # No per-step totals (a kernel, or an operator absent from some step): the mean.
    kernel = Metric(MetricKind.KERNEL, "k", calls=12, total_ns=600.0)
    assert compared_value(kernel, 3, PerStep.FASTEST) == 200.0


def test_fastest_leaves_the_step_and_other_units_on_their_mean() -> None:
    step = Metric(MetricKind.STEP, "step", samples_ns=[9e6, 5e6, 7e6], step_totals_ns=[1.0, 2.0])
    assert compared_value(step, 3, PerStep.FASTEST) == 7e6
    rate = Metric(MetricKind.MEASURE, "tokens/s", unit="tokens/s", samples=[10.0, 30.0])
    assert compared_value(rate, 2, PerStep.FASTEST) == 20.0
