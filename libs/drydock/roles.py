"""The agent roles. A thread's ``kind`` is its role; run subjects and proxy grants carry it too."""

from enum import StrEnum


class Role(StrEnum):
    CODER = "coder"
    REVIEWER = "reviewer"
    ANALYZER = "analyzer"
