"""A spend limit reached, and how it is told to people."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from enum import StrEnum


class LimitKind(StrEnum):
    RUN = "run"
    USER_DAY = "user_day"
    REPOSITORY_DAY = "repository_day"


def dollars(amount: float) -> str:
    return f"${amount:,.2f}" if amount >= 0.01 or amount == 0 else f"${amount:.4f}"


@dataclass(frozen=True)
class Reached:
    """``spent_usd`` is the known part of the spend; ``unpriced_calls`` the calls of unknown cost."""

    kind: LimitKind
    limit_usd: float
    spent_usd: float
    unpriced_calls: int = 0
    subject: str = ""
    """The user or repository a day budget belongs to."""

    @property
    def limit_text(self) -> str:
        match self.kind:
            case LimitKind.RUN:
                return f"this run's spend limit of {dollars(self.limit_usd)}"
            case LimitKind.USER_DAY:
                return f"the day budget of {dollars(self.limit_usd)} per user ({self.subject})"
        return f"the day budget of {dollars(self.limit_usd)} for {self.subject}"

    @property
    def spent_text(self) -> str:
        when = "in this run" if self.kind is LimitKind.RUN else "today (UTC)"
        if self.unpriced_calls:
            calls = "call" if self.unpriced_calls == 1 else "calls"
            return (
                f"spent {dollars(self.spent_usd)} {when} plus {self.unpriced_calls} model {calls} of unknown cost "
                "(the model has no known price, so the limit cannot be checked)"
            )
        return f"spent {dollars(self.spent_usd)} {when}"

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, raw: str) -> Reached:
        data = json.loads(raw)
        return cls(
            kind=LimitKind(data["kind"]),
            limit_usd=float(data["limit_usd"]),
            spent_usd=float(data["spent_usd"]),
            unpriced_calls=int(data.get("unpriced_calls", 0)),
            subject=str(data.get("subject", "")),
        )
