"""Enabled repositories: the repositories the GitHub App is installed on, and for each whether
the coder, the reviewer and autofix work there. Administrators only."""

from __future__ import annotations

from pydantic import ValidationError

from drydock.accounts import RepositorySettings, repository_name
from drydock.accounts.records import DEFAULT_PROTECTED_PATHS
from services.dashboard.budgets.schemas import RepositoryBudgetsIO
from services.dashboard.context import Dashboard
from services.dashboard.errors import DashboardError, Invalid, NotFound
from services.dashboard.repositories.schemas import RepositoriesOut, RepositoryAdd, RepositoryIn, RepositoryOut


def full_name(owner: str, name: str, *, at: tuple[str, ...] = ("path", "name")) -> str:
    """``owner/name``; :class:`Invalid` at ``at`` if it is not a repository name."""
    try:
        return repository_name(f"{owner}/{name}")
    except ValueError as error:
        raise Invalid.field(at, str(error)) from None


class Repositories:
    def __init__(self, dashboard: Dashboard) -> None:
        self._accounts = dashboard.accounts
        self._installations = dashboard.installations

    async def listing(self) -> RepositoriesOut:
        enabled = {repo.full_name.lower(): repo for repo in await self._accounts.repositories()}
        status = "ok" if self._installations.configured else "not configured"
        installed = []
        try:
            installed = await self._installations.repositories()
        except DashboardError as error:
            status = error.message
        rows: dict[str, RepositoryOut] = {}
        for repo in installed:
            settings = enabled.get(repo.full_name.lower())
            rows[repo.full_name.lower()] = _row(repo.full_name, settings, installed=True, private=repo.private)
        for key, settings in enabled.items():
            if key not in rows:
                known = False if status == "ok" else None
                rows[key] = _row(settings.full_name, settings, installed=known, private=None)
        return RepositoriesOut(repositories=[rows[key] for key in sorted(rows)], installations=status)

    async def add(self, change: RepositoryAdd) -> RepositoryOut:
        """Enable a repository named ``owner/name`` (how one is enabled without a GitHub App)."""
        owner, _, name = change.full_name.strip().partition("/")
        return await self.enable(owner, name, change, at=("body", "full_name"))

    async def enable(
        self, owner: str, name: str, change: RepositoryIn, *, at: tuple[str, ...] = ("path", "name")
    ) -> RepositoryOut:
        """Enable the repository with these toggles (or change them). With a GitHub App configured
        the App must be installed on it."""
        repository = full_name(owner, name, at=at)
        installed: bool | None = None
        private: bool | None = None
        if self._installations.configured:
            found = {repo.full_name.lower(): repo for repo in await self._installations.repositories()}
            if repository.lower() not in found:
                found = {repo.full_name.lower(): repo for repo in await self._installations.repositories(fresh=True)}
            repo = found.get(repository.lower())
            if repo is None:
                raise Invalid.field(at, f"the GitHub App is not installed on {repository}")
            repository, installed, private = repo.full_name, True, repo.private
        paths = DEFAULT_PROTECTED_PATHS if change.protected_paths is None else tuple(change.protected_paths)
        try:
            settings = RepositorySettings(
                full_name=repository, coder=change.coder, reviewer=change.reviewer, autofix=change.autofix,
                plan_approval=change.plan_approval, protected_paths=paths, budgets=change.budgets.record(),
            )  # fmt: skip
        except ValidationError as error:
            raise Invalid.from_validation(error) from None
        await self._accounts.save_repository(settings)
        return _row(repository, settings, installed=installed, private=private)

    async def disable(self, owner: str, name: str) -> None:
        repository = full_name(owner, name)
        if not await self._accounts.remove_repository(repository):
            raise NotFound(f"{repository} is not enabled")


def _row(
    name: str, settings: RepositorySettings | None, *, installed: bool | None, private: bool | None
) -> RepositoryOut:
    return RepositoryOut(
        full_name=name,
        installed=installed,
        private=private,
        enabled=settings is not None,
        coder=settings.coder if settings else False,
        reviewer=settings.reviewer if settings else False,
        autofix=settings.autofix if settings else False,
        budgets=RepositoryBudgetsIO.of(settings.budgets) if settings else RepositoryBudgetsIO(),
        plan_approval=settings.plan_approval if settings else False,
        protected_paths=list(settings.protected_paths if settings else DEFAULT_PROTECTED_PATHS),
    )
