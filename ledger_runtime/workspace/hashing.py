"""The ledger's content hash on this machine, xxh3-128, and the local workspace's hash cache.

A file's digest is the hex xxh3_128 of its bytes (``XXH3``). The stat-keyed cache and what an unhashable file gets are
the portable scanner's (``scanning/filestate.py``), which a container's helper runs with its own hash, having no xxhash.
"""

from __future__ import annotations

import xxhash

from ledger_runtime.workspace.scanning import filestate
from ledger_runtime.workspace.scanning.filestate import (  # noqa: F401  (the names the rest of the core uses)
    RACY_NS,
    Digests,
    FileState,
    count_lines,
    open_quietly,
)

XXH3 = Digests("xxh3-128", xxhash.xxh3_128)


def digest_bytes(data: bytes) -> str:
    """The ledger's content hash: hex xxh3_128."""
    return xxhash.xxh3_128_hexdigest(data)


class HashCache(filestate.HashCache):
    """Digests of files by path, re-read only when their stat data changes or is racy; xxh3-128 by default."""

    def __init__(self, max_hash_bytes: int = 64 * 1024 * 1024, digests: Digests = XXH3):
        super().__init__(digests, max_hash_bytes)
