"""What the model is sent: the state view's notes (notes.py) and the history copy they are kept in (history.py).

Nothing already sent changes from one call to the next."""
