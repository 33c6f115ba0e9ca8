"""GitHub's GraphQL API, with the caller's authorization: review threads and resolving them."""

from __future__ import annotations

from typing import Any

from githubkit.exception import GraphQLFailed, RequestError, RequestFailed

from drydock.errors import OutboundFailed
from drydock.github.installations import Installations
from drydock.github.responses import failure, graphql_failure, json_body

REVIEW_THREADS_QUERY = """
query ReviewThreads($owner: String!, $name: String!, $number: Int!) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewThreads(first: 100) {
        nodes { id isResolved comments(first: 1) { nodes { databaseId } } }
      }
    }
  }
}
"""
RESOLVE_THREAD_MUTATION = """
mutation ResolveReviewThread($threadId: ID!) {
  resolveReviewThread(input: {threadId: $threadId}) { thread { id isResolved } }
}
"""


class Graphql(Installations):
    @property
    def graphql_url(self) -> str:
        """GitHub's GraphQL endpoint: ``https://api.github.com/graphql``, or ``https://HOST/api/graphql``
        on GitHub Enterprise Server (whose REST root is ``https://HOST/api/v3``)."""
        if self.api_url.endswith("/api/v3"):
            return self.api_url.removesuffix("/v3") + "/graphql"
        return self.api_url + "/graphql"

    async def graphql(self, authorization: str, query: str, variables: dict[str, Any], doing: str) -> dict[str, Any]:
        """The ``data`` of a GraphQL request (sent to :attr:`graphql_url`); :class:`OutboundFailed`
        for HTTP or GraphQL errors (GraphQL answers 200 with ``errors``; ``FORBIDDEN`` maps to 403,
        ``NOT_FOUND`` to 404)."""
        try:
            return await self.as_caller(authorization).async_graphql(query, variables)
        except GraphQLFailed as failed:
            errors = [{"type": error.type, "message": error.message} for error in failed.response.errors or []]
            raise graphql_failure(errors, doing) from None
        except RequestFailed as failed:
            # A rate limit answers 200 with ``errors``, which githubkit raises as a request failure.
            response = failed.response.raw_response
            body = json_body(response)
            if response.is_success and isinstance(body, dict):
                raise graphql_failure(body.get("errors"), doing) from None
            raise failure(response, doing) from None
        except RequestError as error:
            raise self.unreachable(error) from None
        except ValueError:
            raise OutboundFailed(f"GitHub answered neither data nor errors {doing}", status=502) from None

    async def review_threads(self, authorization: str, full_name: str, number: int) -> list[dict[str, Any]]:
        """The review threads of a pull request: ``id``, ``isResolved`` and the ``databaseId`` of
        their first comment (the first 100 threads)."""
        owner, _, name = full_name.partition("/")
        data = await self.graphql(
            authorization,
            REVIEW_THREADS_QUERY,
            {"owner": owner, "name": name, "number": number},
            f"listing review threads of {full_name}#{number}",
        )
        pull = ((data.get("repository") or {}).get("pullRequest")) or {}
        nodes = (pull.get("reviewThreads") or {}).get("nodes") or []
        return [node for node in nodes if isinstance(node, dict)]

    async def resolve_review_thread(self, authorization: str, thread_id: str) -> None:
        """Mark a review thread resolved (idempotent)."""
        await self.graphql(
            authorization, RESOLVE_THREAD_MUTATION, {"threadId": thread_id}, f"resolving review thread {thread_id}"
        )
