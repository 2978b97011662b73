"""Prices."""


def discounted(amount, rate):
    """amount reduced by rate (0.1 = 10%), rounded to cents."""
    return round(amount * (1 - rate), 2)
