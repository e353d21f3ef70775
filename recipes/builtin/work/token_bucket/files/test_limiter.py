import unittest
from limiter import RateLimiter

class TestLimiter(unittest.TestCase):
    def test_burst_then_refill(self):
        r = RateLimiter(rate=1, burst=2)
        self.assertTrue(r.allow("k", now=0))
        self.assertTrue(r.allow("k", now=0))
        self.assertFalse(r.allow("k", now=0))
        self.assertAlmostEqual(r.retry_after("k", now=0), 1.0)
        self.assertTrue(r.allow("k", now=1))

    def test_keys_independent(self):
        r = RateLimiter(rate=1, burst=1)
        self.assertTrue(r.allow("a", now=0))
        self.assertTrue(r.allow("b", now=0))
