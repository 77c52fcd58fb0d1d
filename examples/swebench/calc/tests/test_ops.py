import unittest

from calc.ops import divide, mul


class TestMul(unittest.TestCase):
    def test_mul(self):
        self.assertEqual(mul(3, 4), 12)


class TestDivide(unittest.TestCase):
    def test_divide(self):
        self.assertEqual(divide(9, 3), 3)
