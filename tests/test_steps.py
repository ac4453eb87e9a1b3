from perfci.formats._steps import collect_steps, detect_warmup, step_number


def test_step_names() -> None:
    assert step_number("Train step 0") == ("Train step", 0)
    assert step_number("train_step-12") == ("train_step", 12)
    assert step_number("ProfilerStep#551") == ("ProfilerStep", 551)
    assert step_number("Layer 0") is None
    assert step_number("forward") is None


def test_warmup_detection() -> None:
    assert detect_warmup([8.15e9, 1.0e9, 1.01e9]) == 1
    assert detect_warmup([1.0, 1.02, 0.99, 1.01]) == 0
    assert detect_warmup([9.0, 5.0, 1.0, 1.0]) == 2
    assert detect_warmup([9.0, 1.0]) == 1
    assert detect_warmup([5.0]) == 0


def test_collect_sorts_numerically() -> None:
    [step] = collect_steps(
        [
            ("ProfilerStep#10", 3.0),
            ("ProfilerStep#9", 2.0),
            ("ProfilerStep#8", 9.0),
            ("forward", 1.0),
        ]
    )
    assert step.name == "ProfilerStep"
    assert step.samples_ns == [9.0, 2.0, 3.0]
    assert step.warmup == 1
    assert step.calls == 3
