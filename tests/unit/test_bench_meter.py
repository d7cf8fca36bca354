"""The benchmark's record counter: exact across listener threads, without a lock per record."""

import threading

from rocketkafka.tools.bench.contenders import _Meter


def _run_on_threads(listener, threads: int, calls: int) -> None:
    workers = [threading.Thread(target=lambda: [listener(None) for _ in range(calls)]) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def test_the_per_record_listener_counts_exactly_from_several_threads():
    meter = _Meter(4 * 25_000)
    _run_on_threads(meter.per_record(), threads=4, calls=25_000)
    assert meter.done.is_set() and meter.seen == meter.count
    assert 0 < meter.first <= meter.last


def test_the_window_is_not_closed_one_record_early():
    meter = _Meter(4 * 25_000 + 1)
    listener = meter.per_record()
    _run_on_threads(listener, threads=4, calls=25_000)
    assert not meter.done.is_set() and meter.last == 0.0
    listener(None)
    assert meter.done.is_set() and meter.last >= meter.first > 0
