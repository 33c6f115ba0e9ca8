"""A canned GitHub for the autofix benchmark: every agent pull request's head is the agent's own
commit and fails ``tests``, which passes on ``main``. ``python -m bench.canned_github PORT LATENCY``
serves it, answering after LATENCY seconds (``PUT /_latency/SECONDS`` changes that); it imports
nothing heavy, so it starts at once.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from aiohttp import web

AGENT_EMAIL = "drydock@users.noreply.github.com"


def head_of(number: int) -> str:
    """The head revision of agent pull request ``number``, as the canned GitHub reports it."""
    return hashlib.sha1(f"bench:{number}".encode()).hexdigest()


def canned(method: str, path: str) -> tuple[int, dict[str, Any]]:
    """GitHub's answer to ``method path``."""
    parts = path.strip("/").split("/")
    if path.endswith("/installation"):
        return 200, {"id": 1, "permissions": {}}
    if path.endswith("/access_tokens"):
        expires = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        return 201, {"token": "ghs_bench", "expires_at": expires}
    if parts[3:4] == ["pulls"]:
        number = int(parts[4])
        head = {"ref": f"b{number}", "sha": head_of(number)}
        return 200, {"number": number, "state": "open", "head": head, "base": {"ref": "main", "sha": "0" * 40}}
    if parts[3:4] == ["commits"] and len(parts) == 5:
        identity = {"name": "Drydock", "email": AGENT_EMAIL}
        return 200, {"sha": parts[4], "commit": {"author": identity, "committer": identity}}
    if parts[3:4] == ["commits"] and parts[5:6] == ["check-runs"]:
        conclusion = "success" if parts[4] == "main" else "failure"
        run = {"id": 1, "name": "tests", "status": "completed", "conclusion": conclusion, "completed_at": "x"}
        return 200, {"total_count": 1, "check_runs": [run]}
    if method == "POST":
        return 201, {"id": 2}
    return 404, {"message": "Not Found"}


async def serve(port: int, latency: float) -> None:
    """The canned GitHub as a process of its own, answering after ``latency`` seconds."""

    delay = {"seconds": latency}

    async def answer(request: web.Request) -> web.Response:
        if delay["seconds"]:
            await asyncio.sleep(delay["seconds"])
        status, body = canned(request.method, request.path)
        return web.json_response(body, status=status)

    async def set_latency(request: web.Request) -> web.Response:
        delay["seconds"] = float(request.match_info["seconds"])
        return web.json_response(delay)

    app = web.Application()
    app.router.add_put("/_latency/{seconds}", set_latency)
    app.router.add_route("*", "/{path:.*}", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1]), float(sys.argv[2])))
