"""Small numeric helpers."""


def range_sum(a, b):
    """Sum of the integers from a to b, both included."""
    return sum(range(a, b))


def clamp(x, lo, hi):
    return max(lo, min(hi, x))
