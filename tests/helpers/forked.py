"""Running a function in a forked child that may be killed, for the crash-safety scripts (kill_during_*.py)."""

import os
from typing import Callable


def run_forked(function: Callable[[], object]) -> int:
    """Call ``function()`` in a child forked from this process; minus the signal that ended it, or its exit status
    (0 when it returned, 1 when it raised)."""
    child = os.fork()
    if child == 0:
        status = 1
        try:
            function()
            status = 0
        finally:
            os._exit(status)
    _, status = os.waitpid(child, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
