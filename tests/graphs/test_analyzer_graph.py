"""The analyzer's prompt and backend: which skill the run follows, its evidence as a read-only
file beside the sandbox, and the skills route."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from deepagents.backends import FilesystemBackend

from drydock.bus.envelopes import Channel, ReplyAddress
from drydock.graphs.analyzer import FreshSkills, evidence_files
from drydock.graphs.analyzer_prompt import EVIDENCE_FILE, EVIDENCE_ROUTE, analyzer_prompt
from drydock.review.analysis import Evidence, EvidenceItem
from drydock.review.checkouts import AnalysisCheckout
from drydock.roles import Role
from drydock.skills import SKILLS_ROUTE, skill_files, with_read_only_routes
from drydock.threads.scope import ThreadScope

SCOPE = ThreadScope("t-1", "run-1", Role.ANALYZER, "acme/widgets", ReplyAddress(channel=Channel.SCHEDULER))
ITEM = EvidenceItem(id="C7", kind="review_comment", pull_request=3, comment_id=7, body="Use with.")


def checkout(mode: str) -> AnalysisCheckout:
    evidence = Evidence.model_validate(
        {"repository": "acme/widgets", "mode": mode, "items": [ITEM], "pull_requests": 1}
    )
    return AnalysisCheckout(repository="acme/widgets", path="/w/widgets", evidence=evidence)


class TestAnalyzerPrompt:
    def test_each_mode_follows_its_skill(self) -> None:
        bootstrap = analyzer_prompt(SCOPE, checkout("bootstrap"))
        assert "follow `/skills/analyzer-bootstrap/SKILL.md`" in bootstrap
        assert "(1 review comments, 0 finding outcomes, from 1 pull requests)" in bootstrap
        assert "/skills/analyzer-continual/SKILL.md" in analyzer_prompt(SCOPE, checkout("continual"))

    def test_without_evidence_it_says_so(self) -> None:
        assert "no evidence" in analyzer_prompt(SCOPE, None)


class TestBackend:
    async def test_the_evidence_and_skills_are_read_only_files_beside_the_sandbox(self, tmp_path: Path) -> None:
        sandbox = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
        backend = with_read_only_routes(
            sandbox, {SKILLS_ROUTE: skill_files(), EVIDENCE_ROUTE: evidence_files(checkout("bootstrap"))}
        )
        read = await backend.aread(EVIDENCE_FILE)
        assert read.file_data is not None
        assert '"id": "C7"' in read.file_data["content"]
        assert (await backend.awrite(EVIDENCE_FILE, "{}")).error
        assert (await sandbox.als("/")).entries == []


class TestFreshSkills:
    async def test_the_skills_are_reloaded_at_every_run(self, tmp_path: Path) -> None:
        backend = with_read_only_routes(
            FilesystemBackend(root_dir=tmp_path, virtual_mode=True), {SKILLS_ROUTE: skill_files()}
        )
        middleware = FreshSkills(backend=backend, sources=[SKILLS_ROUTE])
        assert middleware.name == "SkillsMiddleware"
        stale: dict[str, list[Any]] = {"messages": [], "skills_metadata": []}
        update = await middleware.abefore_agent(cast(Any, stale), cast(Any, None), {})
        assert update is not None
        assert len(update["skills_metadata"]) == 2
