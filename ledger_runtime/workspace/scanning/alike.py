"""Where two texts or byte strings differ: the ends they share, found by C in halving slices.

Comparing character by character or record by record is too slow for a 100,000-entry git listing after one ``git add``,
or an output against the one before it.

Python 3.6+, standard library only (the package docstring says why).
"""


def common_prefix(x, y):
    """Length of the longest common prefix of ``x`` and ``y``."""
    lo, hi = 0, min(len(x), len(y))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if x[lo:mid] == y[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def common_suffix(x, y):
    """Length of the longest common suffix of ``x`` and ``y``, without reversed copies of either."""
    lo, hi = 0, min(len(x), len(y))
    nx, ny = len(x), len(y)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if x[nx - mid : nx - lo] == y[ny - mid : ny - lo]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def trim_common(before, after, sep=b"\n"):
    """``before`` and ``after`` without the whole records, each ending with ``sep``, they begin and end with alike.

    A record common to both sides changes no count of what was added or removed, so any such cut gives the same answer.
    """
    p = common_prefix(before, after)
    p = before.rfind(sep, 0, p) + 1  # back to a record start (0 when there is none)
    x, y = before[p:], after[p:]
    s = common_suffix(x, y)
    if s:
        tail = x[len(x) - s :]
        k = tail.find(sep)
        if k >= 0 and k + 1 < len(tail):
            cut = s - (k + 1)  # the common tail from the record start after that separator
            x, y = x[: len(x) - cut], y[: len(y) - cut]
    return x, y
