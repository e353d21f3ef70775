def toc(markdown):
    raise NotImplementedError
