"""Check runs listed with the caller's authorization: the latest of each name, across pages."""

from __future__ import annotations

from drydock.github import GithubClient
from tests.fakes.github import FakeGithub
from tests.fakes.github.history import history_of
from tests.fakes.github.state import Installation
from tests.github.conftest import REPO

SHA = "a" * 40


class TestCheckRuns:
    async def test_the_latest_run_of_each_name_across_pages(
        self, github: FakeGithub, client: GithubClient, installation: Installation
    ) -> None:
        history = history_of(github.state)
        for index in range(140):
            history.add_check_run(REPO, f"job-{index:03}", SHA, "failure")
        history.add_check_run(REPO, "job-000", SHA, "success")
        runs = await client.list_check_runs(await client.app_authorization(REPO), REPO, SHA)
        assert len(runs) == 140
        latest = {run["name"]: run["conclusion"] for run in runs}
        assert latest["job-000"] == "success"
        assert latest["job-139"] == "failure"

    async def test_a_created_run_is_listed_and_updated(self, client: GithubClient, installation: Installation) -> None:
        run_id = await client.create_check_run(
            installation.id, REPO, name="Drydock", head_sha=SHA, status="in_progress"
        )
        await client.update_check_run(
            installation.id, REPO, run_id, status="completed", conclusion="success", title="done"
        )
        runs = await client.list_check_runs(await client.app_authorization(REPO), REPO, SHA, limit=10)
        assert [(run["id"], run["conclusion"], run["output"]["title"]) for run in runs] == [(run_id, "success", "done")]
