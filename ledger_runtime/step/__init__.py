"""The stages of one step, which runtime.py calls in order: plan, respond, record.

plan analyses the command, signs what it reads and decides its verdict; respond builds what the model gets; record makes
the attempt and its events as the ledger keeps them."""
