"""The scanner that runs anywhere: listing, git classification, ignore handling and file states.

One implementation, run in two places: in-process by the local workspace (``workspace/scanner.py``
adds inotify, its snapshots and settings) and inside a container by the helper
(``adapters/container/helper.py`` keeps its state in a file between calls). So everything here is
Python 3.6+ and the standard library alone: no annotations that 3.6 evaluates, no dataclasses, no
``typing`` (its import alone costs the helper milliseconds at every command), and the content hash
is a parameter (``filestate.Digests``): xxh3-128 locally, blake2b-128 in a container, which has no
xxhash. Modules import each other relatively: the container gets this directory as it is.

- ``filestate``: a file's state (digest, size, lines) behind a stat cache that never trusts a racy entry;
- ``gitview``: what git says (the work tree's top, its index and ignore files, listings, check-ignore);
- ``bounds``: how much of what is new one scan takes in, and the directories it stops tracking;
- ``filemap``: a snapshot's map of files, which a change does not copy;
- ``engine``: the scanner itself (``WorkspaceScanner``), full walks and event-driven increments;
- ``signatures``: the signatures of read keys;
- ``persist``: the scanner's state as plain data, for a process that scans once per call.
"""

import os

HERE = os.path.dirname(os.path.abspath(__file__))


def scanner_sources():
    """This package's modules as (path relative to the package's parent, bytes), sorted by path: what a
    container is sent, and what the helper there checks it still has."""
    name = os.path.basename(HERE)
    out = []
    for n in sorted(os.listdir(HERE)):
        if n.endswith(".py"):
            with open(os.path.join(HERE, n), "rb") as f:
                out.append((name + "/" + n, f.read()))
    return out


def pack_sources(files):
    """Files, [(relative path, bytes)], as one stream: each one's path, NUL, size, NUL, bytes."""
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
