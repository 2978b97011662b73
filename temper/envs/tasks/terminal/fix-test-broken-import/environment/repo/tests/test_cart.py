from shop import Cart


def test_total():
    c = Cart()
    c.add('pen', 1.5, 4)
    c.add('book', 12.0)
    assert c.total() == 18.0
    assert c.total(0.5) == 9.0
