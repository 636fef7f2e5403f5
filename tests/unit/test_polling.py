from itertools import islice

from gpushare.polling import pauses


def test_the_pauses_start_short_and_double_up_to_the_interval():
    assert list(islice(pauses(1.0), 6)) == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]


def test_an_interval_shorter_than_the_first_pause_is_kept():
    assert list(islice(pauses(0.05), 3)) == [0.05, 0.05, 0.05]


def test_a_long_interval_is_reached_and_never_passed():
    assert max(islice(pauses(5.0), 20)) == 5.0
