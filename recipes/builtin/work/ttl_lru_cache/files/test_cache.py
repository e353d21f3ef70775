import unittest
from cache import TTLCache

class TestTTLCache(unittest.TestCase):
    def test_expiry(self):
        c = TTLCache(2, ttl=10)
        c.put("a", 1, now=0)
        self.assertEqual(c.get("a", now=5), 1)
        self.assertIsNone(c.get("a", now=10))

    def test_lru_eviction(self):
        c = TTLCache(2, ttl=100)
        c.put("a", 1, now=0)
        c.put("b", 2, now=1)
        c.get("a", now=2)
        c.put("c", 3, now=3)
        self.assertIsNone(c.get("b", now=4))
        self.assertEqual(c.get("a", now=4), 1)

    def test_expired_evicted_first(self):
        c = TTLCache(2, ttl=100)
        c.put("a", 1, now=0, ttl=1)
        c.put("b", 2, now=0)
        c.put("c", 3, now=5)
        self.assertEqual(c.get("b", now=6), 2)
        self.assertEqual(len(c), 2)
