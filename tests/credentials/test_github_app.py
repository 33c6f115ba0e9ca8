"""Minting installation tokens against the fake GitHub, and the fake's own checks of the App
JWT (it must refuse what GitHub refuses, or these tests prove nothing)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from collections.abc import AsyncIterator

import httpx
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from drydock.config import GithubSettings
from drydock.credentials import GithubAppTokens, TokenMintError
from drydock.github.app_jwt import AppKeyError, app_jwt, load_app_key
from tests.credentials.conftest import REPOSITORY
from tests.fakes.github import App, FakeGithub


@contextlib.asynccontextmanager
async def _dropping_first_connections(target: str, *, drops: int) -> AsyncIterator[tuple[str, list[bool]]]:
    """A TCP relay to ``target`` that closes its first ``drops`` connections unanswered."""
    upstream = httpx.URL(target)
    dropped: list[bool] = []

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(dropped) < drops:
            dropped.append(True)
            await reader.read(1)
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection(upstream.host, upstream.port)
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    server = await asyncio.start_server(relay, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}", dropped


def _minter(app: App, api_url: str, *, private_key: str | None = None) -> GithubAppTokens:
    settings = GithubSettings.model_validate(
        {"api_url": api_url, "app_id": app.id, "private_key": private_key or app.private_key_pem}
    )
    return GithubAppTokens.from_settings(settings)


@pytest.fixture
async def minter(github: FakeGithub, github_app: App) -> AsyncIterator[GithubAppTokens]:
    tokens = _minter(github_app, github.base_url)
    yield tokens
    await tokens.aclose()


def _signed(claims: dict[str, object], key: rsa.RSAPrivateKey) -> str:
    def segment(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    signing_input = (
        f"{segment(json.dumps({'alg': 'RS256', 'typ': 'JWT'}).encode())}.{segment(json.dumps(claims).encode())}"
    )
    return f"{signing_input}.{segment(key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256()))}"


class TestMint:
    async def test_coder_token_is_scoped_to_the_repository_with_write(
        self, minter: GithubAppTokens, github: FakeGithub
    ) -> None:
        token = await minter.mint(REPOSITORY, read_only=False)
        assert token.token.startswith("ghs_")
        assert token.repositories == (REPOSITORY,)
        assert token.permissions["contents"] == "write"
        assert github.git_access(token.token, REPOSITORY) == "write"
        assert github.git_access(token.token, "acme/gadgets") == "none"

    async def test_read_only_token_cannot_write(self, minter: GithubAppTokens, github: FakeGithub) -> None:
        token = await minter.mint(REPOSITORY, read_only=True)
        assert set(token.permissions.values()) == {"read"}
        assert github.git_access(token.token, REPOSITORY) == "read"

    async def test_every_mint_is_a_fresh_token(self, minter: GithubAppTokens) -> None:
        first = await minter.mint(REPOSITORY, read_only=False)
        second = await minter.mint(REPOSITORY, read_only=False)
        assert first.token != second.token

    async def test_repository_without_the_app_is_a_clear_error(self, minter: GithubAppTokens) -> None:
        with pytest.raises(TokenMintError, match="not installed on acme/nowhere"):
            await minter.mint("acme/nowhere", read_only=False)

    async def test_unreachable_github_is_a_clear_error(self, github_app: App) -> None:
        tokens = _minter(github_app, "http://127.0.0.1:9")
        try:
            with pytest.raises(TokenMintError, match="cannot reach GitHub"):
                await tokens.mint(REPOSITORY, read_only=False)
        finally:
            await tokens.aclose()

    async def test_a_dropped_connection_is_tried_again(self, github: FakeGithub, github_app: App) -> None:
        async with _dropping_first_connections(github.base_url, drops=2) as (url, dropped):
            tokens = _minter(github_app, url)
            try:
                token = await tokens.mint(REPOSITORY, read_only=False)
            finally:
                await tokens.aclose()
        assert dropped == [True, True]
        assert token.repositories == (REPOSITORY,)

    async def test_wrong_key_is_refused_by_github(self, github: FakeGithub, github_app: App) -> None:
        stranger = github.create_app()
        tokens = _minter(github_app, github.base_url, private_key=stranger.private_key_pem)
        try:
            with pytest.raises(TokenMintError, match="401 'A JSON web token could not be decoded'"):
                await tokens.mint(REPOSITORY, read_only=False)
        finally:
            await tokens.aclose()

    def test_a_bad_private_key_is_a_clear_error(self) -> None:
        with pytest.raises(AppKeyError, match="DRYDOCK_GITHUB_PRIVATE_KEY"):
            load_app_key("-----BEGIN RSA PRIVATE KEY-----\nnope\n-----END RSA PRIVATE KEY-----\n")


class TestFakeChecksTheJwt:
    async def _installation(self, github: FakeGithub, jwt: str) -> httpx.Response:
        async with httpx.AsyncClient(base_url=github.base_url) as client:
            return await client.get(f"/repos/{REPOSITORY}/installation", headers={"Authorization": f"Bearer {jwt}"})

    async def test_valid_jwt_gets_the_installation(self, github: FakeGithub, github_app: App) -> None:
        response = await self._installation(github, app_jwt(github_app.id, github_app.private_key))
        assert response.status_code == 200
        body = response.json()
        assert body["app_id"] == github_app.id
        assert body["account"]["login"] == "acme"
        assert body["access_tokens_url"].endswith(f"/app/installations/{body['id']}/access_tokens")

    async def test_expired_jwt(self, github: FakeGithub, github_app: App) -> None:
        response = await self._installation(
            github, app_jwt(github_app.id, github_app.private_key, now=time.time() - 900)
        )
        assert response.status_code == 401
        assert response.json()["message"].startswith("'Expiration time' claim ('exp') must be")
        assert response.json()["status"] == "401"

    async def test_jwt_expiring_too_far_ahead(self, github: FakeGithub, github_app: App) -> None:
        now = int(time.time())
        claims = {"iat": now - 60, "exp": now + 3600, "iss": str(github_app.id)}
        response = await self._installation(github, _signed(claims, github_app.private_key))
        assert response.status_code == 401
        assert "too far in the future" in response.json()["message"]

    async def test_jwt_issued_in_the_future(self, github: FakeGithub, github_app: App) -> None:
        response = await self._installation(
            github, app_jwt(github_app.id, github_app.private_key, now=time.time() + 300)
        )
        assert response.status_code == 401
        assert response.json()["message"].startswith("'Issued at' claim ('iat')")

    async def test_unsigned_jwt(self, github: FakeGithub, github_app: App) -> None:
        header, claims, _ = app_jwt(github_app.id, github_app.private_key).split(".")
        response = await self._installation(github, f"{header}.{claims}.")
        assert response.status_code == 401
        assert response.json()["message"] == "A JSON web token could not be decoded"

    async def test_unknown_app(self, github: FakeGithub) -> None:
        response = await self._installation(github, app_jwt(999_999, rsa.generate_private_key(65537, 2048)))
        assert response.status_code == 401
        assert response.json()["message"] == "Integration not found"

    async def test_no_credentials(self, github: FakeGithub) -> None:
        async with httpx.AsyncClient(base_url=github.base_url) as client:
            response = await client.post("/app/installations/1/access_tokens")
        assert response.status_code == 401
        assert response.json()["message"] == "Requires authentication"

    async def test_scope_outside_the_installation_is_422(self, github: FakeGithub, github_app: App) -> None:
        installation = (await self._installation(github, app_jwt(github_app.id, github_app.private_key))).json()
        async with httpx.AsyncClient(base_url=github.base_url) as client:
            response = await client.post(
                f"/app/installations/{installation['id']}/access_tokens",
                headers={"Authorization": f"Bearer {app_jwt(github_app.id, github_app.private_key)}"},
                json={"repositories": ["not-installed-here"]},
            )
        assert response.status_code == 422
        assert "not accessible to the parent installation" in response.json()["message"]
