class TTLCache:
    def __init__(self, capacity, ttl):
        raise NotImplementedError

    def get(self, key, now):
        raise NotImplementedError

    def put(self, key, value, now, ttl=None):
        raise NotImplementedError

    def __len__(self):
        raise NotImplementedError
