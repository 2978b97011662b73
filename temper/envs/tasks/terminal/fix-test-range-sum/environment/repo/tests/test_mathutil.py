from mathutil import clamp, range_sum


def test_range_sum():
    assert range_sum(1, 4) == 10


def test_clamp():
    assert clamp(5, 0, 3) == 3
