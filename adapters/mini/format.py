"""What mini-swe-agent's side of the conversation looks like, as the ledger needs it: how the agent
submits (a command whose output starts with the marker line ends the run)."""

from ledger_runtime import Submission

MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
SUBMISSION = Submission(MARKER)
