from itertools import islice

from gpushare.polling import pauses


def test_the_pauses_stay_short_for_a_second_then_double_up_to_the_interval():
    assert [round(p, 3) for p in islice(pauses(1.0), 14)] == [0.1] * 10 + [0.2, 0.4, 0.8, 1.0]
    assert round(sum(islice(pauses(1.0), 10)), 3) == 1.0


def test_an_interval_shorter_than_the_first_pause_is_kept():
    assert list(islice(pauses(0.05), 13)) == [0.05] * 13


def test_a_long_interval_is_reached_and_never_passed():
    assert max(islice(pauses(5.0), 30)) == 5.0
