"""``pdm run demo --dashboard``: after the scenario the stack keeps running with the dashboard,
the printed link signs in and opens the thread, and Ctrl-C stops everything."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path

import httpx
import pytest

from drydock.threads import ids
from tests.e2e.pipeline import ORG
from tests.e2e.test_github_issue import ISSUE

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"(http://127\.0\.0\.1:\d+/auth/dev/link/\S+)")


class TestDemoDashboard:
    @pytest.mark.timeout(240)
    async def test_the_printed_link_opens_the_thread_signed_in_and_ctrl_c_stops_it(self) -> None:
        environment = {k: v for k, v in os.environ.items() if not k.startswith("DRYDOCK_")}
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tools.demo",
            "--dashboard",
            cwd=ROOT,
            env=environment,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        assert process.stdout is not None
        output: list[str] = []
        try:
            try:
                async with asyncio.timeout(180):
                    while not (found := LINK.search("".join(output))):
                        line = (await process.stdout.readline()).decode()
                        assert line, "the demo exited early:\n" + "".join(output)
                        output.append(line)
            except TimeoutError:
                pytest.fail("the demo printed no dashboard link within 180 s:\n" + "".join(output))
            thread_id = ids.github_issue("github.com", ORG, "widgets", ISSUE)
            async with httpx.AsyncClient(follow_redirects=True, timeout=30) as client:
                page = await client.get(found[1])
                assert page.status_code == 200, page.text
                assert page.url.path == f"/threads/{thread_id}"
                assert f'action="/threads/{thread_id}/messages"' in page.text
                assert "Fix add()" in page.text or "please fix add()" in page.text
                # Still serving after the page: the stack did not stop with the scenario.
                assert (await client.get(str(page.url))).status_code == 200

            process.send_signal(signal.SIGINT)
            rest = (await asyncio.wait_for(process.stdout.read(), 60)).decode()
            assert await asyncio.wait_for(process.wait(), 60) == 0, "".join(output) + rest
            assert "stopping" in rest
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
