"""Redacting secrets from what the agent says to the outside (comments, pull requests, reviews,
Slack and Linear messages, run events).

Three kinds of finding, each replaced by ``[redacted: <kind>]`` and logged without its value:

- known formats: GitHub tokens (``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_``,
  ``github_pat_``), Slack tokens (``xox?-``), AWS access key ids, Google API keys, OpenAI keys,
  private key blocks, JWTs, and the password part of a URL's credentials;
- high-entropy tokens in credential-like context (``api_key=…``, ``"secret": "…"``,
  ``Authorization: Bearer …``);
- the exact values of the secrets Drydock holds (:meth:`Redactor.from_settings`: every
  ``SecretStr`` setting, the crypto keys and the passwords in URL settings;
  :meth:`Redactor.with_values` adds a run's own, such as its sandbox's grant).

A small pattern set of our own rather than a library: Yelp's ``detect-secrets`` (1.5.0, the
maintained detector on PyPI) scans files line by line under process-global settings, reports
values rather than positions, and took about 10 ms per 1 KB message with its default plugins,
flagging ordinary prose as high-entropy strings outside its file filters (measured 2026-12-04);
this scan is a few regular expressions over the text, well under a millisecond
(``pdm run bench accounting``).
"""

from __future__ import annotations

import contextlib
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import structlog
from pydantic import BaseModel, SecretStr

from drydock.config import Settings

log = structlog.get_logger(__name__)

MIN_KNOWN_LENGTH = 8
"""Shorter configured values are not searched for: they would redact ordinary words."""
MIN_ENTROPY = 3.0
"""Bits per character a value in credential-like context needs to count as a secret."""

_FORMATS: tuple[tuple[str, tuple[str, ...], re.Pattern[str]], ...] = (
    # (kind, literals one of which a match contains, pattern): a regular expression runs only
    # over a text holding one of its literals, since a substring test is far cheaper.
    (
        "private key",
        ("PRIVATE KEY-----",),
        re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----(?:.*?-----END [A-Z0-9 ]*KEY-----|.*)", re.S),
    ),
    (
        "GitHub token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{22,255})"),
    ),
    ("Slack token", ("xox",), re.compile(r"\bxox[a-z]-[A-Za-z0-9-]{10,}")),
    ("AWS access key", ("AKIA", "ASIA", "ABIA", "ACCA"), re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b")),
    ("Google API key", ("AIza",), re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("OpenAI API key", ("sk-",), re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}")),
    ("JWT", ("eyJ",), re.compile(r"\beyJ[A-Za-z0-9_-]{6,}\.eyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}")),
)
_CONTEXT_WORDS = ("secret", "token", "passw", "pwd", "key", "auth", "credential", "bearer", "basic")
_URL_CREDENTIAL = re.compile(r"://[^/\s:@]+:([^/\s@]+)@")
_IN_CONTEXT = re.compile(
    r"""(?ix)
    (?:
        (?:secret|token|passw(?:or)?d|pwd|api[_-]?key|access[_-]?key|auth|credential|private[_-]?key)
        [a-z0-9_.-]{0,40}["']?\s*[:=]\s*["']?
      | \bbearer\s+
      | \bbasic\s+
    )
    ([A-Za-z0-9+/_.~-]{16,}={0,2})
    """
)


_IN_CONTEXT_STARTS = (
    "secret",
    "token",
    "passw",
    "pwd",
    "api",
    "access",
    "auth",
    "credential",
    "private",
    "bearer",
    "basic",
)
"""How a match of :data:`_IN_CONTEXT` begins (lower case): each of its alternatives' first word."""


def _in_context(text: str, lowered: str) -> Iterator[re.Match[str]]:
    """The matches of :data:`_IN_CONTEXT` in ``text`` (``lowered`` is ``text.lower()``), as its
    ``finditer`` finds them. The expression is tried only where one of its words begins: tried
    at every position, it cost about 70 µs for a tool's 500-character output. Only for ASCII
    text, whose lower case has the same offsets and where ignoring case matches nothing else."""
    if not text.isascii():
        yield from _IN_CONTEXT.finditer(text)
        return
    starts: set[int] = set()
    for word in _IN_CONTEXT_STARTS:
        start = lowered.find(word)
        while start >= 0:
            starts.add(start)
            start = lowered.find(word, start + 1)
    end = 0
    for start in sorted(starts):
        if start < end:
            continue
        match = _IN_CONTEXT.match(text, start)
        if match is not None:
            yield match
            end = match.end()


@dataclass(frozen=True)
class Finding:
    """A secret found in a text: what kind, and where (character offsets)."""

    kind: str
    start: int
    end: int


def _entropy(value: str) -> float:
    counts = Counter(value)
    total = len(value)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


class Redactor:
    """Finds and replaces secrets in text; immutable, safe to share between runs."""

    def __init__(self, known: Mapping[str, str] | None = None) -> None:
        """``known`` maps a secret's exact value to what it is (e.g. ``"DRYDOCK_SLACK_BOT_TOKEN"``)."""
        self._known = {value: kind for value, kind in (known or {}).items() if len(value) >= MIN_KNOWN_LENGTH}

    @classmethod
    def from_settings(cls, settings: Settings) -> Redactor:
        """A redactor that also knows every secret value in ``settings``."""
        return cls(dict(_secret_values(settings, "DRYDOCK")))

    def with_values(self, known: Mapping[str, str]) -> Redactor:
        """This redactor, knowing ``known`` (value → kind) as well."""
        return Redactor({**self._known, **known})

    def scan(self, text: str) -> list[Finding]:
        """The secrets in ``text``, in order, overlapping findings merged (the first kind wins)."""
        found: list[Finding] = []
        for value, kind in self._known.items():
            start = text.find(value)
            while start >= 0:
                found.append(Finding(f"Drydock's {kind}", start, start + len(value)))
                start = text.find(value, start + len(value))
        for kind, literals, pattern in _FORMATS:
            if any(literal in text for literal in literals):
                found += [Finding(kind, m.start(), m.end()) for m in pattern.finditer(text)]
        if "://" in text:
            found += [Finding("URL credential", m.start(1), m.end(1)) for m in _URL_CREDENTIAL.finditer(text)]
        lowered = text.lower()
        if any(word in lowered for word in _CONTEXT_WORDS):
            for match in _in_context(text, lowered):
                value = match.group(1)
                if _entropy(value) >= MIN_ENTROPY and any(c.isdigit() for c in value):
                    found.append(Finding("credential", match.start(1), match.end(1)))
        if not found:
            return found
        found.sort(key=lambda f: (f.start, -f.end))
        merged = [found[0]]
        for finding in found[1:]:
            last = merged[-1]
            if finding.start < last.end:
                if finding.end > last.end:
                    merged[-1] = Finding(last.kind, last.start, finding.end)
                continue
            merged.append(finding)
        return merged

    def redact(self, text: str, *, where: str, thread_id: str | None = None) -> str:
        """``text`` with each secret replaced by ``[redacted: <kind>]``; a redaction is logged
        (its kinds, ``where`` and the thread), never its value."""
        findings = self.scan(text)
        if not findings:
            return text
        parts: list[str] = []
        position = 0
        for finding in findings:
            parts += [text[position : finding.start], f"[redacted: {finding.kind}]"]
            position = finding.end
        parts.append(text[position:])
        log.warning("secret redacted", where=where, thread_id=thread_id, kinds=[f.kind for f in findings])
        return "".join(parts)

    def redact_value(self, value: Any, *, where: str, thread_id: str | None = None) -> Any:
        """``value`` with every string in it (through lists, tuples and dicts) redacted."""
        if isinstance(value, str):
            return self.redact(value, where=where, thread_id=thread_id)
        if isinstance(value, dict):
            return {key: self.redact_value(item, where=where, thread_id=thread_id) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.redact_value(item, where=where, thread_id=thread_id) for item in value)
        return value


def _secret_values(model: BaseModel, name: str) -> Iterable[tuple[str, str]]:
    for field, value in model:
        setting = f"{name}_{field.upper()}"
        yield from _secrets_in(value, setting)


def _secrets_in(value: Any, setting: str) -> Iterable[tuple[str, str]]:
    if isinstance(value, SecretStr):
        secret = value.get_secret_value()
        yield secret, setting
        # A PEM's body also leaves in pieces (one line of it is enough to hurt).
        for line in secret.splitlines():
            if len(line.strip()) >= 40 and not line.startswith("-----"):
                yield line.strip(), setting
    elif isinstance(value, str) and "://" in value:
        # A URL setting (Redis, NATS) may carry a password of its own.
        with contextlib.suppress(ValueError):
            if password := urlsplit(value).password:
                yield unquote(password), setting
    elif isinstance(value, BaseModel):
        yield from _secret_values(value, setting)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _secrets_in(item, setting)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _secrets_in(item, setting)
