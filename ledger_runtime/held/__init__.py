"""What the model holds: the earlier outputs the model still has, and what of the history is sent.

- ``holds``: the room's front (``Held``): which steps the model still holds, the outputs delivered to
  it (the sources of references), the answers that outlive their sources, and ``history``: what to
  send in place of each earlier output of an agent's history.
- ``delivered``: the bookkeeping of delivered output lines (the pool the answers are built from).
- ``context``: the context policy (which earlier outputs are sent, and the stubs in place of the rest).
- ``standing``: answers that refer to other outputs, and what they stand for.
"""
