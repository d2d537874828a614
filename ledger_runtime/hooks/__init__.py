"""What an agent that runs commands itself calls around each one: the hook client and the command
wrapper (standard library only, run by path through ``fasthook.py``), and the server in the
runtime's process that answers them."""

from __future__ import annotations

TYPE_CHECKING = False  # nothing imported here: the hook client's start-up pays for every module
if TYPE_CHECKING:
    from pathlib import Path


def fasthook_script() -> Path:
    """The script a hook configuration runs by path (``python -S -E fasthook.py hook EVENT ...``)."""
    from pathlib import Path

    return Path(__file__).with_name("fasthook.py")
