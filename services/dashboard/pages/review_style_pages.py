"""Review-style pages: the overview, one repository's versions, editing, deciding and bootstrap."""

import re

from fastapi import APIRouter, Request, Response

from services.dashboard.errors import Invalid, NotFound
from services.dashboard.pages.common import PageKit, back, form_errors
from services.dashboard.pages.forms import read_form
from services.dashboard.review_styles.schemas import DecisionIn, EditIn, RuleIO
from services.dashboard.review_styles.service import ReviewStyles

_RULE = re.compile(r"^\s*(?:\[(?P<category>[^\]]{1,60})\]\s*)?(?P<text>.+?)\s*$")


def routes(site: APIRouter, kit: PageKit) -> None:
    guard = kit.dashboard.guard
    styles = ReviewStyles(kit.dashboard)

    @site.get("/review-styles")
    async def review_style_list(request: Request) -> Response:
        principal = await kit.signed_in(request)
        return kit.render(request, "review_styles.html", principal, styles=await styles.overview(principal))

    @site.get("/review-styles/{owner}/{name}")
    async def review_style(request: Request, owner: str, name: str) -> Response:
        principal = await kit.signed_in(request)
        return kit.render(
            request, "review_style.html", principal, style=await styles.get(principal, owner, name), errors={}
        )

    @site.post("/review-styles/{owner}/{name}/versions")
    async def edit_review_style(request: Request, owner: str, name: str) -> Response:
        principal = await kit.administrator(request)
        form = await read_form(request, guard, principal)
        rules = []
        for line in form.text("rules").splitlines():
            match = _RULE.match(line)
            if match and match.group("text").strip():
                rules.append(RuleIO(text=match.group("text")[:2000], category=match.group("category")))
        based_on = form.text("based_on")
        try:
            try:
                change = EditIn(rules=rules, based_on=int(based_on) if based_on.isdigit() else None)
            except ValueError:
                raise Invalid.field(("body", "rules"), "write between 1 and 100 rules, one per line") from None
            saved = await styles.edit(principal, owner, name, change)
        except Invalid as invalid:
            return kit.render(
                request, "review_style.html", principal, 422, style=await styles.get(principal, owner, name),
                typed_rules=form.text("rules"), errors={"rules": "; ".join(form_errors(invalid).values())},
            )  # fmt: skip
        return back(f"/review-styles/{owner}/{name}", f"Saved version {saved.version}.")

    @site.post("/review-styles/{owner}/{name}/versions/{version}/{decision}")
    async def decide_review_style(request: Request, owner: str, name: str, version: int, decision: str) -> Response:
        principal = await kit.administrator(request)
        form = await read_form(request, guard, principal)
        if decision not in {"approve", "reject"}:
            raise NotFound("no such decision")
        note = DecisionIn(note=form.text("note")[:2000])
        await styles.decide(principal, owner, name, version, note, approve=decision == "approve")
        return back(f"/review-styles/{owner}/{name}", f"Version {version} {decision}d.")

    @site.post("/review-styles/{owner}/{name}/bootstrap")
    async def bootstrap_review_style(request: Request, owner: str, name: str) -> Response:
        principal = await kit.administrator(request)
        await read_form(request, guard, principal)
        started = await styles.bootstrap(principal, owner, name)
        return back(
            f"/review-styles/{owner}/{name}",
            f"Asked the analyzer to learn {started.repository}'s guidelines; its state is shown below.",
        )
