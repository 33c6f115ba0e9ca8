"""``save_guidelines``: the analyzer's only tool. Saves the repository's review guidelines as a
new version, each rule citing the evidence it was learned from (provenance).

Sources must be ids of the run's evidence, or sources of the current rules a rule carries over.
Saving rules identical to the newest version adds no version but still records that the
evidence was considered. A bootstrap run's save finishes the bootstrap, which registers the
repository's continual refinement (once); a continual run's save moves its cursor.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from drydock.review.analysis import AnalysisProgress, EvidenceStore, finish_bootstrap
from drydock.review.guidelines import MAX_RULES, Guideline, GuidelinesStore, Provenance
from drydock.tools.context import ToolContext

NAME = "save_guidelines"

DESCRIPTION = (
    "Save the repository's review guidelines: the complete rule set, each rule an imperative sentence "
    "with a short category and the ids of the evidence it was learned from (`sources`, e.g. C1234 or "
    "P7.F2), and a `summary` of what you looked at and what changed. Creates a new version awaiting "
    "approval (unless identical to the newest one)."
)


class RuleInput(BaseModel):
    text: str = Field(min_length=1, max_length=2000, description="The rule, as one imperative sentence.")
    category: str | None = Field(default=None, max_length=60, description="e.g. correctness, tests, style.")
    sources: list[str] = Field(min_length=1, description="Evidence ids this rule was learned from.")


class SaveGuidelinesInput(BaseModel):
    rules: list[RuleInput] = Field(max_length=MAX_RULES, description="Every rule of the new version.")
    summary: str = Field(min_length=1, max_length=4000, description="What you considered and what changed.")


def build(context: ToolContext) -> BaseTool:
    settings = context.settings

    async def save_guidelines(rules: list[RuleInput], summary: str) -> dict[str, Any]:
        scope = context.scope
        repository = scope.repository
        evidence = await EvidenceStore(context.redis, context.keys).get(scope.thread_id)
        if repository is None or evidence is None:
            raise ToolException("This run has no evidence to learn from; nothing was saved.")
        known = evidence.sources()
        unknown = sorted({source for rule in rules for source in rule.sources if source not in known})
        if unknown:
            raise ToolException(
                f"Unknown sources {', '.join(unknown)}: cite ids from /analysis/evidence.json "
                "(its items, or the sources of the current rules). Nothing was saved."
            )
        guidelines = [
            Guideline(
                text=rule.text.strip(),
                category=rule.category.strip().lower() if rule.category else None,
                sources=tuple(known[source] for source in dict.fromkeys(rule.sources)),
            )
            for rule in rules
        ]
        host = settings.github.host
        store = GuidelinesStore(context.redis, context.keys, host=host)
        latest = await store.latest(repository)
        if latest is not None and latest.rules == tuple(guidelines):
            version, created = latest.version, False
        else:
            provenance = Provenance(
                mode=evidence.mode,
                summary=summary,
                based_on=latest.version if latest else None,
                thread_id=scope.thread_id,
                run_id=scope.run_id,
                evidence=evidence.counts(),
            )
            approved_by = "auto" if settings.review.auto_approve_guidelines else None
            version = await store.save(repository, guidelines, provenance, approved_by=approved_by)
            created = True
        answer: dict[str, Any] = {"version": version, "created": created, "rules": len(guidelines)}
        if evidence.mode == "bootstrap":
            scheduled = await finish_bootstrap(
                context.redis,
                context.keys,
                host=host,
                repository=repository,
                thread_id=scope.thread_id,
                every=settings.review.refine_interval,
            )
            answer["continual_refinement"] = "scheduled" if scheduled else "already scheduled"
        else:
            await AnalysisProgress(context.redis, context.keys, host=host).set(
                repository, refined_until=repr(evidence.until)
            )
        return answer

    return StructuredTool.from_function(
        coroutine=save_guidelines,
        name=NAME,
        description=DESCRIPTION,
        args_schema=SaveGuidelinesInput,
        handle_tool_error=True,
    )
