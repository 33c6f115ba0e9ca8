from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from drydock.credentials import Grant
from drydock.roles import Role
from services.credential_proxy.policy import api_denial, api_repository, git_denial


def _grant(role: Role, repository: str | None = "acme/widgets") -> Grant:
    now = datetime.now(UTC)
    return Grant("d", role, "s1", "t1", repository, now, now + timedelta(hours=1))


class TestGit:
    @pytest.mark.parametrize("role", list(Role))
    def test_every_role_may_fetch(self, role: Role) -> None:
        assert git_denial(_grant(role), "acme/widgets", "info/refs", "git-upload-pack") is None
        assert git_denial(_grant(role), "acme/widgets", "git-upload-pack", None) is None

    @pytest.mark.parametrize("role", [Role.REVIEWER, Role.ANALYZER])
    def test_read_only_roles_may_not_push(self, role: Role) -> None:
        for endpoint, service in (("info/refs", "git-receive-pack"), ("git-receive-pack", None)):
            denial = git_denial(_grant(role), "acme/widgets", endpoint, service)
            assert denial is not None
            assert denial.reason == "read_only"

    def test_coder_may_push(self) -> None:
        assert git_denial(_grant(Role.CODER), "acme/widgets", "git-receive-pack", None) is None

    def test_scope(self) -> None:
        denial = git_denial(_grant(Role.CODER), "acme/gadgets", "info/refs", "git-upload-pack")
        assert denial is not None
        assert denial.reason == "repository_scope"
        no_repository = git_denial(_grant(Role.CODER, None), "acme/widgets", "info/refs", "git-upload-pack")
        assert no_repository is not None
        assert no_repository.reason == "no_repository"

    @pytest.mark.parametrize("repository", ["acme/\u212ait", "acme/k it", "acme/.."])
    def test_a_name_that_is_no_repository_name_is_refused(self, repository: str) -> None:
        denial = git_denial(_grant(Role.CODER, "acme/kit"), repository, "info/refs", "git-upload-pack")
        assert denial is not None
        assert denial.reason == "repository_name"
        in_api = api_denial(_grant(Role.CODER, "acme/kit"), "GET", f"repos/{repository}")
        assert in_api is not None
        assert in_api.reason in {"repository_name", "path"}


class TestApi:
    @pytest.mark.parametrize("method", ["GET", "HEAD", "OPTIONS"])
    def test_reviewer_reads(self, method: str) -> None:
        assert api_denial(_grant(Role.REVIEWER), method, "repos/acme/widgets/pulls") is None

    @pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
    def test_reviewer_writes_are_refused(self, method: str) -> None:
        denial = api_denial(_grant(Role.REVIEWER), method, "repos/acme/widgets/pulls")
        assert denial is not None
        assert denial.reason == "read_only"
        assert api_denial(_grant(Role.CODER), method, "repos/acme/widgets/pulls") is None

    def test_scope_and_dot_segments(self) -> None:
        assert api_repository("repos/acme/widgets/issues/1") == "acme/widgets"
        assert api_repository("user") is None
        other = api_denial(_grant(Role.CODER), "GET", "repos/acme/gadgets")
        assert other is not None
        assert other.reason == "repository_scope"
        dotted = api_denial(_grant(Role.CODER), "GET", "repos/acme/widgets/../../gadgets")
        assert dotted is not None
        assert dotted.reason == "path"
