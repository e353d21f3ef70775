def allocate(meetings):
    raise NotImplementedError
