from itertools import islice

import pytest

from gpushare import polling
from gpushare.polling import WaitTimeout, pauses, wait_for


def test_the_pauses_stay_short_for_a_second_then_double_up_to_the_interval():
    assert [round(p, 3) for p in islice(pauses(1.0), 14)] == [0.1] * 10 + [0.2, 0.4, 0.8, 1.0]
    assert round(sum(islice(pauses(1.0), 10)), 3) == 1.0


def test_an_interval_shorter_than_the_first_pause_is_kept():
    assert list(islice(pauses(0.05), 13)) == [0.05] * 13


def test_a_long_interval_is_reached_and_never_passed():
    assert max(islice(pauses(5.0), 30)) == 5.0


def test_wait_for_returns_the_first_truthy_answer_pausing_as_pauses_gives(monkeypatch):
    slept = []
    monkeypatch.setattr(polling.time, "sleep", slept.append)
    answers = iter([None, 0, "", [], None, None, None, None, None, None, None, None, "done"])
    assert wait_for(lambda: next(answers), 60, "an answer", interval_s=1.0) == "done"
    assert [round(p, 3) for p in slept] == [round(p, 3) for p in islice(pauses(1.0), 12)]


def test_wait_for_names_what_it_awaited_and_the_last_error(monkeypatch):
    now = iter(range(0, 1000, 10))
    monkeypatch.setattr(polling.time, "monotonic", lambda: next(now))
    monkeypatch.setattr(polling.time, "sleep", lambda _: None)

    def probe():
        raise ValueError("not yet")

    with pytest.raises(WaitTimeout, match=r"^timed out after 30s waiting for the thing \(last error: not yet\)$"):
        wait_for(probe, 30, "the thing")
