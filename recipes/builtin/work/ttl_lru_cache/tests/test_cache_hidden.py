import unittest
from cache import TTLCache


class TestTTLCacheHidden(unittest.TestCase):
    def test_missing_key(self):
        c = TTLCache(2, ttl=10)
        self.assertIsNone(c.get("nope", now=0))
        self.assertEqual(len(c), 0)

    def test_alive_until_just_before_expiry(self):
        c = TTLCache(2, ttl=10)
        c.put("a", 1, now=0)
        self.assertEqual(c.get("a", now=9.999), 1)
        self.assertIsNone(c.get("a", now=10))

    def test_expired_get_removes_entry(self):
        c = TTLCache(3, ttl=5)
        c.put("a", 1, now=0)
        c.put("b", 2, now=0, ttl=50)
        self.assertIsNone(c.get("a", now=6))
        self.assertEqual(len(c), 1)

    def test_per_entry_ttl_overrides_default(self):
        c = TTLCache(3, ttl=5)
        c.put("long", 1, now=0, ttl=100)
        c.put("short", 2, now=0)
        self.assertIsNone(c.get("short", now=50))
        self.assertEqual(c.get("long", now=50), 1)

    def test_update_refreshes_value_and_expiry(self):
        c = TTLCache(2, ttl=10)
        c.put("a", 1, now=0)
        c.put("a", 2, now=8)
        self.assertEqual(c.get("a", now=15), 2)
        self.assertEqual(len(c), 1)

    def test_update_when_full_evicts_nothing(self):
        c = TTLCache(2, ttl=100)
        c.put("a", 1, now=0)
        c.put("b", 2, now=1)
        c.put("b", 3, now=2)
        self.assertEqual(c.get("a", now=3), 1)
        self.assertEqual(c.get("b", now=3), 3)
        self.assertEqual(len(c), 2)

    def test_update_refreshes_recency(self):
        c = TTLCache(2, ttl=100)
        c.put("a", 1, now=0)
        c.put("b", 2, now=1)
        c.put("a", 3, now=2)
        c.put("c", 4, now=3)
        self.assertIsNone(c.get("b", now=4))
        self.assertEqual(c.get("a", now=4), 3)
        self.assertEqual(c.get("c", now=4), 4)

    def test_all_expired_dropped_before_any_live_eviction(self):
        c = TTLCache(3, ttl=100)
        c.put("a", 1, now=0, ttl=1)
        c.put("b", 2, now=0)
        c.put("c", 3, now=0, ttl=2)
        c.put("d", 4, now=5)
        self.assertEqual(len(c), 2)
        self.assertEqual(c.get("b", now=6), 2)
        self.assertEqual(c.get("d", now=6), 4)

    def test_capacity_one(self):
        c = TTLCache(1, ttl=10)
        c.put("a", 1, now=0)
        c.put("b", 2, now=1)
        self.assertIsNone(c.get("a", now=2))
        self.assertEqual(c.get("b", now=2), 2)
        self.assertEqual(len(c), 1)

    def test_len_counts_live_entries_at_last_time_seen(self):
        c = TTLCache(3, ttl=100)
        c.put("a", 1, now=0, ttl=5)
        c.put("b", 2, now=1)
        self.assertEqual(len(c), 2)
        c.get("b", now=6)
        self.assertEqual(len(c), 1)

    def test_many_operations_stay_consistent(self):
        c = TTLCache(50, ttl=30)
        for t in range(2000):
            c.put(t % 120, t, now=t)
            if t % 7 == 0:
                self.assertEqual(c.get((t - 3) % 120, now=t), t - 3 if t >= 3 else None)
        self.assertEqual(len(c), 30)
