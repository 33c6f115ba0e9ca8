"""Reading which mutations a GraphQL document asks for."""

from __future__ import annotations

import pytest

from services.credential_proxy.graphql_mutations import document_mutations, request_mutations


class TestDocuments:
    @pytest.mark.parametrize(
        ("document", "mutations"),
        [
            ("{ viewer { login } }", set()),
            ('query Q($n: Int = 3) @cached { repository(name: "}{") { id } }', set()),
            ('mutation { resolveReviewThread(input: {threadId: "T"}) { thread { id } } }', {"resolveReviewThread"}),
            ("mutation { a: createCommitOnBranch(input: {}) { commit { oid } } }", {"createCommitOnBranch"}),
            ("mutation @x(if: true) { updateRef(input: {}) @skip(if: false) { clientMutationId } }", {"updateRef"}),
            ('# mutation { x }\nquery { a(s: """ } mutation { y } """) }\nmutation { z }', {"z"}),
            ("subscription { s }", {"s"}),
        ],
    )
    def test_the_root_fields_of_its_mutations(self, document: str, mutations: set[str]) -> None:
        assert document_mutations(document) == frozenset(mutations)

    @pytest.mark.parametrize(
        "document",
        [
            "mutation { ...F } fragment F on Mutation { createCommitOnBranch { x } }",
            "mutation { ... on Mutation { createCommitOnBranch { x } } }",
            "mutation { x ",
            "extend type Mutation { x }",
            "mutation { x } }",
            "mutation { x(a: 1)) }",
            "mutation { x } %",
            "mutation { " + "a " * 30_000 + "}",
        ],
    )
    def test_what_it_cannot_read_with_certainty_is_none(self, document: str) -> None:
        assert document_mutations(document) is None


class TestRequests:
    @pytest.mark.parametrize(
        ("body", "encoding"),
        [
            (b'{"query": "{ a }", "query": "mutation { b }"}', ""),
            (b'[{"query": "{ a }"}]', ""),
            (b'{"query": 1}', ""),
            (b"not json", ""),
            (b"[" * 100_000, ""),
            (b'{"query": "{ a }"}', "gzip"),
        ],
    )
    def test_an_unreadable_request_is_none(self, body: bytes, encoding: str) -> None:
        assert request_mutations(body, encoding) is None

    def test_a_plain_query(self) -> None:
        assert request_mutations(b'{"query": "{ a }", "variables": {}}', "identity") == frozenset()
