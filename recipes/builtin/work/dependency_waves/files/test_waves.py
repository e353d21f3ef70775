import unittest
from waves import waves, CycleError

class TestWaves(unittest.TestCase):
    def test_diamond(self):
        deps = {"d": ["b", "c"], "b": ["a"], "c": ["a"]}
        self.assertEqual(waves(deps), [["a"], ["b", "c"], ["d"]])

    def test_independent(self):
        self.assertEqual(waves({"x": [], "y": []}), [["x", "y"]])

    def test_cycle(self):
        with self.assertRaises(CycleError) as e:
            waves({"a": ["b"], "b": ["a"]})
        self.assertIn("->", str(e.exception))
