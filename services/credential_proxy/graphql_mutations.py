"""Which mutations a GraphQL request to the code host asks for: the root fields of every
``mutation`` (and ``subscription``) operation in its document, whichever one it names to run.

A small lexer is enough (GraphQL's tokens and its braces); whatever it cannot read with
certainty (a fragment spread in a mutation's root, an unknown definition, a body that is not one
JSON object with a string ``query``, a compressed body) is ``None``, which callers refuse.
"""

from __future__ import annotations

import json
import re
from typing import Any

_TOKEN = re.compile(
    r'(?P<skip>[\s,\ufeff]+|#[^\n\r]*)|(?P<string>"""(?:\\"""|[^"]|"(?!""))*"""|"(?:\\.|[^"\\\n\r])*")'
    r"|(?P<token>\.\.\.|[_A-Za-z][_0-9A-Za-z]*|-?[0-9][_0-9A-Za-z.+-]*|[!$&()=:@\[\]{|}])"
)
_DEFINITIONS = frozenset({"query", "mutation", "subscription", "fragment"})


def _tokens(document: str) -> list[str] | None:
    tokens: list[str] = []
    position = 0
    while position < len(document):
        match = _TOKEN.match(document, position)
        if match is None:
            return None
        if match["string"] is not None:
            tokens.append('""')
        elif match["token"] is not None:
            tokens.append(match["token"])
        position = match.end()
    return tokens


def document_mutations(document: str) -> frozenset[str] | None:
    """The root fields of the document's mutations and subscriptions, or ``None`` if unreadable."""
    tokens = _tokens(document)
    if tokens is None:
        return None
    fields: set[str] = set()
    depth = parens = 0
    operation: str | None = None
    for index, token in enumerate(tokens):
        following = tokens[index + 1] if index + 1 < len(tokens) else ""
        if token == "(":
            parens += 1
        elif token == ")":
            parens -= 1
            if parens < 0:
                return None
        elif parens:
            continue
        elif token == "{":
            operation = operation or "query"
            depth += 1
        elif token == "}":
            depth -= 1
            if depth < 0:
                return None
            if depth == 0:
                operation = None
        elif depth == 0 and operation is None:
            if token not in _DEFINITIONS:
                return None
            operation = token
        elif depth == 1 and operation in {"mutation", "subscription"}:
            if token == "...":
                return None
            is_name = token[0].isalpha() or token[0] == "_"
            if is_name and tokens[index - 1] != "@" and following != ":":
                fields.add(token)
    if depth or parens:
        return None
    return frozenset(fields)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate keys")
    return dict(pairs)


def request_mutations(body: bytes, content_encoding: str) -> frozenset[str] | None:
    """The mutations a GraphQL request body (JSON, ``{"query": …}``) asks for, or ``None`` if unreadable."""
    if content_encoding.strip().lower() not in {"", "identity"}:
        return None
    try:
        payload = json.loads(body, object_pairs_hook=_unique_keys)
    except (ValueError, RecursionError):
        return None
    if not isinstance(payload, dict) or not isinstance(payload.get("query"), str):
        return None
    return document_mutations(payload["query"])
