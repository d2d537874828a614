"""What the model holds: the earlier outputs it still has, and what of the history is sent.

``held`` is the room's front; ``delivered`` keeps the delivered lines answers are built from; ``context`` is the context
policy; ``standing`` keeps answers that may outlive their sources.
"""
