"""What the model is sent: the notes of the state view (notes.py) and the copy of the agent's history
they are kept in (history.py), one call after another, so that nothing already sent changes."""
