class CycleError(Exception):
    """The dependencies hold a cycle; the message lists one as "a -> b -> a"."""


def waves(deps):
    """Tasks in waves: each wave's tasks depend only on earlier waves'.

    Kahn's algorithm a wave at a time; what is left when no task is ready
    lies on or behind a cycle, and following dependencies from any of it
    must come back to a task already on the path.
    """
    needs = {}
    for task, ds in deps.items():
        needs.setdefault(task, set()).update(ds)
        for d in ds:
            needs.setdefault(d, set())
    waiting = {t: len(ds) for t, ds in needs.items()}
    users = {t: [] for t in needs}
    for t, ds in needs.items():
        for d in ds:
            users[d].append(t)
    out = []
    ready = sorted(t for t, n in waiting.items() if n == 0)
    while ready:
        out.append(ready)
        following = []
        for t in ready:
            for u in users[t]:
                waiting[u] -= 1
                if waiting[u] == 0:
                    following.append(u)
        ready = sorted(following)
    left = {t for t, n in waiting.items() if n > 0}
    if left:
        raise CycleError(" -> ".join(find_cycle(needs, left)))
    return out


def find_cycle(needs, left):
    start = min(left)
    path, seen = [start], {start: 0}
    while True:
        nxt = min(d for d in needs[path[-1]] if d in left)
        if nxt in seen:
            return path[seen[nxt]:] + [nxt]
        seen[nxt] = len(path)
        path.append(nxt)
