import unittest
from logsum import summarize

class TestSummary(unittest.TestCase):
    def test_sample(self):
        with open("sample.log") as f:
            s = summarize(f.read().splitlines())
        self.assertEqual(s["count"], 3)
        self.assertEqual(s["malformed"], 1)
        self.assertEqual(s["levels"]["ERROR"], 1)
        self.assertEqual(s["services"]["api"]["errors"], 1)
        self.assertEqual(s["services"]["api"]["p95"], 250)
        self.assertEqual(s["services"]["db"]["p50"], 40)
