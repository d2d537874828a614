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
