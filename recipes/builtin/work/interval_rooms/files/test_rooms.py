import unittest
from rooms import allocate

class TestRooms(unittest.TestCase):
    def test_simple(self):
        self.assertEqual(allocate([(0, 30), (5, 10), (15, 20)]), [0, 1, 1])

    def test_touching(self):
        self.assertEqual(allocate([(1, 2), (2, 3)]), [0, 0])

    def test_lowest_free(self):
        self.assertEqual(allocate([(0, 10), (0, 5), (6, 8), (5, 7)]), [1, 0, 2, 0])

    def test_invalid(self):
        with self.assertRaises(ValueError):
            allocate([(3, 3)])
