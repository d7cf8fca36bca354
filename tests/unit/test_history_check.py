"""The history checker tells a re-delivery (one offset handled twice) from a record the log holds twice."""

from rocketkafka.testing.history import HandlerCall, check


def _call(offset: int, msg_id: str, at: float) -> HandlerCall:
    return HandlerCall("c1", "t", 0, offset, msg_id, None, at, at + 0.001)


def test_a_redelivered_offset_is_a_duplicate_but_not_written_twice():
    report = check([_call(0, "a", 1.0), _call(1, "b", 2.0), _call(0, "a", 3.0)], ["a", "b"])
    assert (report.duplicate_count, report.written_twice) == (1, 0)


def test_an_id_at_two_offsets_counts_as_written_twice():
    report = check([_call(0, "a", 1.0), _call(1, "a", 2.0), _call(2, "b", 3.0)], ["a", "b"])
    assert (report.duplicate_count, report.written_twice) == (1, 1)
    assert "written twice: 1" in report.summary()
