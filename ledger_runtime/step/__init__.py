"""The stages of one step of the runtime (runtime.py is the front that calls them, in order):
plan (analyse the command, sign what it reads, decide its verdict), respond (build what the model
gets for it), record (the attempt and its events, as the ledger keeps them)."""
