"""The states a run shows in its source channel's status indicator."""

from enum import StrEnum


class RunStatus(StrEnum):
    WORKING = "working"
    FINISHED = "finished"
    STEP_LIMIT = "step_limit"
    STOPPED = "stopped"
    FAILED = "failed"
