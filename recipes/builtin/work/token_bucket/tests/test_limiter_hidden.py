import unittest
from limiter import RateLimiter


def held(r):
    """How many entries the limiter's containers hold together."""
    try:
        values = list(vars(r).values())
    except TypeError:
        values = [getattr(r, n) for n in getattr(r, "__slots__", ()) if hasattr(r, n)]
    return sum(len(v) for v in values if hasattr(v, "__len__") and not isinstance(v, (str, bytes)))


class TestLimiterHidden(unittest.TestCase):
    def test_new_key_starts_full(self):
        r = RateLimiter(rate=1, burst=3)
        self.assertEqual(r.retry_after("k", now=0), 0)
        self.assertTrue(r.allow("k", now=0, cost=3))
        self.assertFalse(r.allow("k", now=0))

    def test_refused_request_takes_nothing(self):
        r = RateLimiter(rate=1, burst=2)
        self.assertTrue(r.allow("k", now=0, cost=2))
        self.assertFalse(r.allow("k", now=0.5))
        self.assertFalse(r.allow("k", now=0.9))
        self.assertTrue(r.allow("k", now=1.0))

    def test_fractional_refill(self):
        r = RateLimiter(rate=2, burst=4)
        self.assertTrue(r.allow("k", now=0, cost=4))
        self.assertAlmostEqual(r.retry_after("k", now=0.25), 0.25)
        self.assertAlmostEqual(r.retry_after("k", now=0.25, cost=3), 1.25)
        self.assertFalse(r.allow("k", now=0.25))
        self.assertTrue(r.allow("k", now=0.5))

    def test_refill_capped_at_burst(self):
        r = RateLimiter(rate=10, burst=2)
        self.assertTrue(r.allow("k", now=0, cost=2))
        self.assertTrue(r.allow("k", now=100, cost=2))
        self.assertFalse(r.allow("k", now=100))

    def test_retry_after_takes_nothing(self):
        r = RateLimiter(rate=1, burst=1)
        self.assertTrue(r.allow("k", now=0))
        for _ in range(5):
            self.assertAlmostEqual(r.retry_after("k", now=0.5), 0.5)
        self.assertTrue(r.allow("k", now=1))

    def test_retry_after_is_zero_when_allowed(self):
        r = RateLimiter(rate=1, burst=5)
        self.assertTrue(r.allow("k", now=0, cost=2))
        self.assertEqual(r.retry_after("k", now=0, cost=3), 0)

    def test_waiting_retry_after_then_allow_succeeds(self):
        r = RateLimiter(rate=3, burst=3)
        self.assertTrue(r.allow("k", now=10, cost=3))
        wait = r.retry_after("k", now=10.1, cost=2)
        self.assertTrue(r.allow("k", now=10.1 + wait + 1e-9, cost=2))

    def test_forgotten_bucket_behaves_as_new(self):
        r = RateLimiter(rate=1, burst=2)
        self.assertTrue(r.allow("k", now=0, cost=2))
        self.assertTrue(r.allow("k", now=10, cost=2))

    def test_memory_stays_bounded(self):
        r = RateLimiter(rate=1, burst=1)
        for i in range(10000):
            r.allow(f"client-{i}", now=float(i))
        self.assertLess(held(r), 5000, "buckets unused for longer than burst/rate seconds must be forgotten")
