"""Skills as virtual, versioned, read-only files: every skill's SKILL.md has a name, a description
and a version; the read-only route serves them beside a sandbox's backend, refuses writes, and
never puts them into the sandbox."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
from deepagents.backends import FilesystemBackend
from deepagents.middleware.skills import SkillsMiddleware

from drydock.skills import ANALYZER_SKILLS, SKILLS_ROUTE, ReadOnlyFiles, skill_files, with_read_only_routes
from drydock.skills.read_only_files import READ_ONLY

SKILL = "/skills/analyzer-bootstrap/SKILL.md"


def front_matter(text: str) -> str:
    assert text.startswith("---\n")
    return text.split("---\n", 2)[1]


def files_under(root: Path) -> list[Path]:
    return sorted(path.relative_to(root) for path in root.rglob("*"))


@pytest.fixture
def sandbox(tmp_path: Path) -> FilesystemBackend:
    """A stand-in for a sandbox's backend: a directory of its own."""
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "README.md").write_text("# widgets\n")
    return FilesystemBackend(root_dir=tmp_path, virtual_mode=True)


class TestPackage:
    @pytest.mark.parametrize("name", ANALYZER_SKILLS)
    def test_each_skill_names_itself_and_carries_a_version(self, name: str) -> None:
        files = skill_files()
        assert f"/{name}/SKILL.md" in files.paths
        meta = front_matter(Path(__file__).parents[2].joinpath("libs/drydock/skills", name, "SKILL.md").read_text())
        assert f"\nname: {name}\n" in f"\n{meta}"
        assert "\ndescription: " in f"\n{meta}"
        assert "\nmetadata:\n  version: " in f"\n{meta}"


class TestReadOnlyRoute:
    async def test_skills_are_listed_read_and_searched_beside_the_sandbox(self, sandbox: FilesystemBackend) -> None:
        backend = with_read_only_routes(sandbox, {SKILLS_ROUTE: skill_files()})
        listed = await backend.als("/skills/")
        assert [entry["path"] for entry in listed.entries or []] == [
            "/skills/analyzer-bootstrap/",
            "/skills/analyzer-continual/",
        ]
        read = await backend.aread(SKILL)
        assert read.file_data is not None
        assert "Bootstrap a repository's review guidelines" in read.file_data["content"]
        found = await backend.agrep("save_guidelines", "/skills/")
        assert {match["path"] for match in found.matches or []} == {SKILL, "/skills/analyzer-continual/SKILL.md"}
        globbed = await backend.aglob("*.md", "/skills/")
        assert len(globbed.matches or []) == 2
        readme = await backend.aread("/repo/README.md")
        assert readme.file_data is not None

    async def test_writes_to_the_skills_fail_and_never_reach_the_sandbox(
        self, sandbox: FilesystemBackend, tmp_path: Path
    ) -> None:
        backend = with_read_only_routes(sandbox, {SKILLS_ROUTE: skill_files()})
        before = files_under(tmp_path)
        assert "read-only" in ((await backend.awrite(SKILL, "pwned")).error or "")
        assert (await backend.aedit(SKILL, "Bootstrap", "Pwned")).error
        assert (await backend.adelete(SKILL)).error
        assert [response.error for response in await backend.aupload_files([(SKILL, b"pwned")])] == [READ_ONLY]
        read = await backend.aread(SKILL)
        assert read.file_data is not None
        assert "pwned" not in read.file_data["content"].lower()
        assert files_under(tmp_path) == before

        written = await backend.awrite("/repo/notes.md", "mine")
        assert written.error is None
        assert (tmp_path / "repo" / "notes.md").read_text() == "mine"

    async def test_the_skills_middleware_loads_them_with_their_versions(self, sandbox: FilesystemBackend) -> None:
        backend = with_read_only_routes(sandbox, {SKILLS_ROUTE: skill_files()})
        middleware = SkillsMiddleware(backend=backend, sources=[SKILLS_ROUTE])
        update = await middleware.abefore_agent({"messages": []}, cast(Any, None), {})
        assert update is not None
        loaded = {skill["name"]: skill for skill in update["skills_metadata"]}
        assert sorted(loaded) == list(ANALYZER_SKILLS)
        assert loaded["analyzer-bootstrap"]["path"] == SKILL
        assert loaded["analyzer-bootstrap"]["metadata"]["version"] == "1.0"


class TestReadOnlyFiles:
    async def test_missing_files_and_directories(self) -> None:
        files = ReadOnlyFiles({"a/b.txt": "one\ntwo\n"})
        assert (await files.aread("/a/c.txt")).error
        assert [r.error for r in await files.adownload_files(["/a/b.txt", "/x"])] == [None, "file_not_found"]
        assert (await files.als("/a/b.txt")).error
        assert (await files.als("/nothing")).entries == []
        window = await files.aread("/a/b.txt", offset=1, limit=1)
        assert window.file_data is not None
        assert window.file_data["content"] == "two\n"
