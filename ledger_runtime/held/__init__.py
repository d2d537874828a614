"""What the model holds: the earlier outputs it still has, and what of the history is sent.

- ``held``: the room's front (``Held``): which steps the model holds, the outputs delivered to it, the answers that
  outlive their sources, and ``history``.
- ``delivered``: the delivered output lines, the pool answers are built from.
- ``context``: the context policy: which earlier outputs are sent, and the stubs in place of the rest.
- ``standing``: answers that refer to other outputs, and what they stand for.
"""
