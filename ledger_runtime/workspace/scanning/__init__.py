"""The scanner that runs anywhere: listing, git classification, ignore handling and file states.

It runs in-process for the local workspace and inside a container as the helper. So everything here is Python 3.6+ and
the standard library alone: no annotations 3.6 evaluates, no dataclasses, no ``typing``, whose import costs the helper
milliseconds a command. The content hash is a parameter (``filestate.Digests``): xxh3-128 locally, blake2b-128 in a
container, which has no xxhash. Modules import each other relatively, since the container gets this directory as it is.
"""

import os

HERE = os.path.dirname(os.path.abspath(__file__))


def scanner_sources():
    """This package's modules, sorted, as (path from its parent, bytes): what a container is sent and checks."""
    name = os.path.basename(HERE)
    out = []
    for n in sorted(os.listdir(HERE)):
        if n.endswith(".py"):
            with open(os.path.join(HERE, n), "rb") as f:
                out.append((name + "/" + n, f.read()))
    return out


def pack_sources(files):
    """``[(relative path, bytes)]`` as one stream: each one's path, NUL, size, NUL, bytes."""
    return b"".join(path.encode() + b"\0" + str(len(data)).encode() + b"\0" + data for path, data in files)


# Unpacks ``pack_sources``'s stream from stdin into the directory argv[1] (``python3 -S -E -c UNPACK DIR``):
# what installs the helper and this package in a container, on any Python 3.6+.
UNPACK_SOURCES = """import os, sys
d, b, i = sys.argv[1], sys.stdin.buffer.read(), 0
while i < len(b):
    j = b.index(b"\\0", i)
    k = b.index(b"\\0", j + 1)
    n = int(b[j + 1 : k])
    p = os.path.join(d, b[i:j].decode())
    if not os.path.isdir(os.path.dirname(p)):
        os.mkdir(os.path.dirname(p), 0o700)
    with open(p, "wb") as f:
        f.write(b[k + 1 : k + 1 + n])
    i = k + 1 + n
"""
