"""Which mutations a GraphQL request to the code host asks for: the root fields of every
``mutation`` (and ``subscription``) operation in its document, whichever one it names to run.

The document is read by graphql-core's parser. Whatever cannot be read with certainty (a
fragment at a mutation's root, a definition that is not an operation or a fragment, a document
that does not parse, a body that is not one JSON object with a string ``query``, a compressed
body) is ``None``, which callers refuse.
"""

from __future__ import annotations

import json
from typing import Any

from graphql import GraphQLError, parse
from graphql.language import FieldNode, FragmentDefinitionNode, OperationDefinitionNode, OperationType

MAX_TOKENS = 20_000
"""A document with more tokens is not parsed (the parser's own bound on its work)."""


def document_mutations(document: str) -> frozenset[str] | None:
    """The root fields of the document's mutations and subscriptions, or ``None`` if unreadable."""
    try:
        parsed = parse(document, no_location=True, max_tokens=MAX_TOKENS)
    except (GraphQLError, RecursionError):
        return None
    fields: set[str] = set()
    for definition in parsed.definitions:
        if isinstance(definition, FragmentDefinitionNode):
            continue
        if not isinstance(definition, OperationDefinitionNode):
            return None
        if definition.operation is OperationType.QUERY:
            continue
        for selection in definition.selection_set.selections:
            if not isinstance(selection, FieldNode):
                return None
            fields.add(selection.name.value)
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
