"""Signing in with GitHub against the GitHub test double: the authorization code flow with
``state`` and PKCE, who becomes an administrator, who may sign in at all (administrators and
members of the allowed organizations), which repositories a person may see (and their refresh
with the stored token), and the refusals."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from cryptography.fernet import Fernet

from drydock.accounts import Provider, TeamDefaults
from drydock.config import load_settings
from drydock.credentials.cipher import SecretCipher
from drydock.credentials.user_tokens import UserTokens
from drydock.github import GithubClient
from services.dashboard.auth.github import GithubSignIn
from tests.dashboard.conftest import PUBLIC_URL, Site, SiteFactory
from tests.fakes.github import FakeGithub
from tests.fakes.github.activity import activity_of
from tests.fakes.github.identity import Identity, identity_of

CALLBACK = f"{PUBLIC_URL}/auth/github/callback"


@dataclass
class SignInFlow:
    site: Site
    github: FakeGithub
    identity: Identity
    crypto_key: str

    async def authorize(self, client: httpx.AsyncClient, login: str = "octocat") -> str:
        """Leave for GitHub and come back: the callback URL GitHub redirects the browser to."""
        start = await client.get("/auth/github?next=/threads/new")
        assert start.status_code == 302, start.text
        self.identity.signed_in = login
        async with httpx.AsyncClient() as browser:
            back = await browser.get(start.headers["location"])
            if back.status_code == 200:  # the consent page, the first time only
                query = parse_qs(urlsplit(start.headers["location"]).query)
                form = {key: values[0] for key, values in query.items()} | {"decision": "authorize"}
                back = await browser.post(f"{self.github.base_url}/login/oauth/authorize", data=form)
        assert back.status_code == 302, back.text
        location = back.headers["location"]
        assert location.startswith(CALLBACK)
        return location.removeprefix(PUBLIC_URL)

    async def sign_in(self, login: str = "octocat") -> httpx.AsyncClient:
        client = self.site.client()
        answer = await client.get(await self.authorize(client, login))
        assert answer.status_code == 303, answer.text
        assert answer.headers["location"] == "/threads/new"
        return client


@pytest.fixture
async def flow(site_factory: SiteFactory, github: FakeGithub, request: pytest.FixtureRequest) -> SignInFlow:
    app = github.create_app("drydock")
    github.install(app, "acme", ["widgets", "gadgets"])
    identity = identity_of(github.state)
    identity.add_user("octocat", name="The Octocat", repositories=["acme/widgets"])
    identity.add_user("hubot", repositories=[])
    identity.add_team("acme", "platform", ["hubot"])
    identity.add_user("mallory", repositories=["acme/widgets"])
    activity_of(github.state).add_member("acme", "octocat")
    client = identity.oauth_client(app, callback_url=CALLBACK)
    key = Fernet.generate_key().decode()
    extra = dict(getattr(request, "param", {}))
    allowed = extra.pop("allowed_organizations", ("acme",))
    site = await site_factory(
        github={"api_url": github.base_url, "app_id": app.id, "private_key": app.private_key_pem},
        dashboard={
            "github_client_id": client.client_id,
            "github_client_secret": client.client_secret,
            "github_web_url": github.base_url,
            "dev_login": False,
            "admin_logins": ["OCTOCAT-ADMIN"],
            "admin_teams": ["acme/platform"],
        }
        | extra,
        crypto={"keys": [key]},
    )
    await site.accounts.save_team(TeamDefaults(allowed_organizations=allowed))
    return SignInFlow(site, github, identity, key)


class TestFlow:
    async def test_a_person_signs_in_and_their_account_is_linked(self, flow: SignInFlow) -> None:
        client = await flow.sign_in()
        me = (await client.get("/api/v1/me")).json()
        user = flow.identity.user("octocat")
        assert user is not None
        assert (me["user_id"], me["login"], me["name"], me["provider"], me["admin"]) == (
            f"gh-{user.id}", "octocat", "The Octocat", "github", False,
        )  # fmt: skip
        assert await flow.site.accounts.user_for(Provider.GITHUB, str(user.id)) == f"gh-{user.id}"

    async def test_the_authorization_uses_state_and_pkce(self, flow: SignInFlow) -> None:
        start = await flow.site.client().get("/auth/github")
        query = parse_qs(urlsplit(start.headers["location"]).query)
        assert start.headers["location"].startswith(f"{flow.github.base_url}/login/oauth/authorize?")
        assert query["code_challenge_method"] == ["S256"]
        assert len(query["code_challenge"][0]) == 43
        assert len(query["state"][0]) >= 32
        assert query["redirect_uri"] == [CALLBACK]

    async def test_the_token_is_stored_encrypted(self, flow: SignInFlow) -> None:
        await flow.sign_in()
        user = flow.identity.user("octocat")
        assert user is not None
        tokens = UserTokens(flow.site.runtime.redis, flow.site.runtime.keys, SecretCipher([flow.crypto_key]))
        stored = await tokens.get(f"gh-{user.id}")
        assert stored is not None
        assert stored.startswith("ghu_")
        raw = await tokens.raw(f"gh-{user.id}")
        assert raw is not None
        assert stored not in raw

    async def test_an_account_linked_before_signs_in_as_its_user(self, flow: SignInFlow) -> None:
        user = flow.identity.user("octocat")
        assert user is not None
        await flow.site.accounts.link(Provider.GITHUB, str(user.id), "user-ada")
        client = await flow.sign_in()
        assert (await client.get("/api/v1/me")).json()["user_id"] == "user-ada"


class TestAdministrators:
    async def test_a_member_of_an_admin_team_is_an_administrator(self, flow: SignInFlow) -> None:
        client = await flow.sign_in("hubot")
        assert (await client.get("/api/v1/me")).json()["admin"] is True

    @pytest.mark.parametrize("flow", [{"admin_logins": ["OctoCat"]}], indirect=True)
    async def test_a_configured_login_is_an_administrator(self, flow: SignInFlow) -> None:
        client = await flow.sign_in()
        assert (await client.get("/api/v1/me")).json()["admin"] is True


class TestOrganizations:
    async def refused(self, flow: SignInFlow, login: str) -> httpx.Response:
        client = flow.site.client()
        answer = await client.get(await flow.authorize(client, login))
        assert answer.status_code == 403, answer.text
        assert "text/html" in answer.headers["content-type"]
        assert "drydock_session" not in answer.headers.get("set-cookie", "")
        user = flow.identity.user(login)
        assert user is not None
        assert await flow.site.accounts.user_for(Provider.GITHUB, str(user.id)) is None
        return answer

    async def test_someone_outside_the_allowed_organizations_is_refused_with_the_reason(self, flow: SignInFlow) -> None:
        answer = await self.refused(flow, "mallory")
        assert "mallory is not a member of acme" in answer.text

    async def test_a_member_is_asked_about_with_their_own_token(self, flow: SignInFlow) -> None:
        await flow.sign_in("octocat")
        (seen,) = [seen for seen in flow.github.requests if seen.path == "/user/memberships/orgs/acme"]
        assert seen.authorization is not None
        assert seen.authorization.startswith("Bearer ghu_")

    @pytest.mark.parametrize("flow", [{"allowed_organizations": ("globex", "acme")}], indirect=True)
    async def test_membership_of_any_allowed_organization_admits(self, flow: SignInFlow) -> None:
        await flow.sign_in("octocat")

    @pytest.mark.parametrize("flow", [{"allowed_organizations": ("globex",)}], indirect=True)
    async def test_an_organization_the_app_is_not_installed_on_admits_nobody(self, flow: SignInFlow) -> None:
        activity_of(flow.github.state).add_member("globex", "octocat")
        await self.refused(flow, "octocat")

    @pytest.mark.parametrize("flow", [{"allowed_organizations": ()}], indirect=True)
    async def test_with_no_organization_allowed_only_administrators_sign_in(self, flow: SignInFlow) -> None:
        answer = await self.refused(flow, "octocat")
        assert "Only Drydock administrators may sign in" in answer.text
        client = await flow.sign_in("hubot")
        assert (await client.get("/api/v1/me")).json()["admin"] is True


class TestRepositoryAccess:
    async def test_people_see_threads_of_the_repositories_github_lets_them_see(self, flow: SignInFlow) -> None:
        visible = await flow.site.thread(str(uuid.uuid4()), repository="acme/widgets")
        await flow.site.thread(str(uuid.uuid4()), repository="acme/gadgets")
        client = await flow.sign_in()
        listed = (await client.get("/api/v1/threads")).json()["threads"]
        assert [thread["id"] for thread in listed] == [visible]

    @pytest.mark.parametrize("flow", [{"access_ttl": 0.2}], indirect=True)
    async def test_access_is_asked_again_with_the_stored_token(self, flow: SignInFlow) -> None:
        gadgets = await flow.site.thread(str(uuid.uuid4()), repository="acme/gadgets")
        client = await flow.sign_in()
        assert (await client.get(f"/api/v1/threads/{gadgets}")).status_code == 403
        user = flow.identity.user("octocat")
        assert user is not None
        assert user.repositories is not None
        user.repositories.add("acme/gadgets")
        await asyncio.sleep(0.3)
        assert (await client.get(f"/api/v1/threads/{gadgets}")).status_code == 200


class TestRefusals:
    async def test_a_callback_is_good_once(self, flow: SignInFlow) -> None:
        client = flow.site.client()
        callback = await flow.authorize(client)
        assert (await client.get(callback)).status_code == 303
        replay = await client.get(callback)
        assert replay.status_code == 400
        assert "expired, was already used" in replay.text

    async def test_a_callback_signs_in_only_the_browser_that_began_it(self, flow: SignInFlow) -> None:
        # Someone begins a sign-in as themselves and sends its callback URL to another browser:
        # opening it there must not sign that browser in as them.
        callback = await flow.authorize(flow.site.client(), login="mallory")
        victim = flow.site.client()
        answer = await victim.get(callback)
        assert answer.status_code == 400
        assert "begun in another browser" in answer.text
        assert (await victim.get("/api/v1/me")).status_code == 401

    async def test_an_unknown_state_is_refused(self, flow: SignInFlow) -> None:
        answer = await flow.site.client().get("/auth/github/callback?code=abc&state=forged")
        assert answer.status_code == 400
        assert "drydock_session" not in answer.headers.get("set-cookie", "")

    async def test_a_code_from_another_attempt_fails_pkce(self, flow: SignInFlow) -> None:
        client = flow.site.client()
        first = parse_qs(urlsplit(await flow.authorize(client)).query)
        second = parse_qs(urlsplit(await flow.authorize(client)).query)
        answer = await client.get(f"/auth/github/callback?code={first['code'][0]}&state={second['state'][0]}")
        assert answer.status_code == 400
        assert "GitHub refused the sign-in" in answer.text

    async def test_a_denied_authorization(self, flow: SignInFlow) -> None:
        client = flow.site.client()
        start = await client.get("/auth/github")
        state = parse_qs(urlsplit(start.headers["location"]).query)["state"][0]
        answer = await client.get(f"/auth/github/callback?error=access_denied&state={state}")
        assert answer.status_code == 400
        assert "access_denied" in answer.text

    async def test_github_sign_in_off_is_404(self, site: Site) -> None:
        assert (await site.client().get("/auth/github")).status_code == 404
        assert (await site.client().get("/auth/github/callback?state=x&code=y")).status_code == 404


class TestEnterprise:
    def test_urls_follow_the_configured_host(self) -> None:
        settings = load_settings(
            github={"host": "ghe.example.com", "api_url": "https://ghe.example.com/api/v3"},
            dashboard={
                "github_client_id": "Iv1.x",
                "github_client_secret": "s",
                "public_url": "https://dock.example.com",
            },
        )
        sign_in = GithubSignIn(settings, httpx.AsyncClient(), GithubClient(settings.github, require_app=False))
        url = sign_in.authorize_url("state", "challenge")
        assert url.startswith("https://ghe.example.com/login/oauth/authorize?client_id=Iv1.x&")
        assert "redirect_uri=https%3A%2F%2Fdock.example.com%2Fauth%2Fgithub%2Fcallback" in url
