import heapq
from collections import OrderedDict


class TTLCache:
    """An LRU cache whose entries expire ttl after they were put.

    Entries live in an OrderedDict in recency order (least recent first) and
    a heap of (expiry, sequence, key) finds the expired ones; a heap entry
    whose key was put again since is stale and skipped.
    """

    def __init__(self, capacity, ttl):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self.ttl = ttl
        self.entries = OrderedDict()  # key -> (value, expiry, sequence)
        self.expiries = []
        self.sequence = 0
        self.now = None

    def _see(self, now):
        if self.now is None or now > self.now:
            self.now = now
        while self.expiries and self.expiries[0][0] <= self.now:
            expiry, seq, key = heapq.heappop(self.expiries)
            entry = self.entries.get(key)
            if entry is not None and entry[2] == seq:
                del self.entries[key]

    def get(self, key, now):
        self._see(now)
        entry = self.entries.get(key)
        if entry is None:
            return None
        self.entries.move_to_end(key)
        return entry[0]

    def put(self, key, value, now, ttl=None):
        self._see(now)
        if ttl is None:
            ttl = self.ttl
        if key not in self.entries and len(self.entries) >= self.capacity:
            self.entries.popitem(last=False)
        self.sequence += 1
        expiry = now + ttl
        self.entries[key] = (value, expiry, self.sequence)
        self.entries.move_to_end(key)
        heapq.heappush(self.expiries, (expiry, self.sequence, key))
        if len(self.expiries) > 2 * len(self.entries) + 16:
            self.expiries = [(e, s, k) for k, (_, e, s) in self.entries.items()]
            heapq.heapify(self.expiries)

    def __len__(self):
        return len(self.entries)
