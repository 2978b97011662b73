import pytest
from duration import parse_duration


def test_single_units():
    assert parse_duration("90s") == 90
    assert parse_duration("5m") == 300


def test_combined():
    assert parse_duration("1h30m") == 5400
    assert parse_duration("1h2m3s") == 3723


def test_rejects_garbage():
    with pytest.raises(ValueError):
        parse_duration("soon")
    with pytest.raises(ValueError):
        parse_duration("5m and more")
