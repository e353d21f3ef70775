def waves(deps):
    raise NotImplementedError
