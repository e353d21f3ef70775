class RateLimiter:
    def __init__(self, rate, burst):
        raise NotImplementedError
