"""The thread owner's approvals on the dashboard (:mod:`drydock.threads.approvals`): what waits
for approval on a thread, and the approve action. Anyone who may see the thread sees what is
held; only its owner approves (403 for anyone else). An approval is followed by a message to
the thread, so the coder that ended its turn waiting continues."""

from __future__ import annotations

from drydock.bus import Bus
from drydock.threads.approvals import Approvals, Plan, PushHold, announce, approval_text, is_owner
from services.dashboard.auth.guard import Principal
from services.dashboard.errors import Forbidden
from services.dashboard.threads.schemas import ApprovalResult, ApprovalsOut, HeldPushOut, PlanOut
from services.dashboard.threads.service import Threads


def plan_out(plan: Plan) -> PlanOut:
    return PlanOut(
        revision=plan.revision,
        description=plan.description,
        todos=[dict(todo) for todo in plan.todos],
        state=plan.state.value,
        submitted_at=plan.submitted_at,
        approved_by=plan.approved_by,
    )


def push_out(hold: PushHold) -> HeldPushOut:
    return HeldPushOut(
        change=hold.change,
        repository=hold.repository,
        refs=[update.line() for update in hold.updates],
        paths=list(hold.paths),
        state=hold.state.value,
        held_at=hold.held_at,
        approved_by=hold.approved_by,
    )


class ThreadApprovals:
    def __init__(self, threads: Threads, approvals: Approvals, bus: Bus) -> None:
        self._threads = threads
        self._approvals = approvals
        self._bus = bus

    async def show(self, principal: Principal, thread_id: str) -> ApprovalsOut:
        thread = await self._threads.visible(principal, thread_id)
        return ApprovalsOut(
            plan=plan_out(plan) if (plan := await self._approvals.plan(thread_id)) else None,
            pushes=[push_out(hold) for hold in await self._approvals.pushes(thread_id)],
            may_approve=is_owner(thread, user_id=principal.user_id),
        )

    async def approve(self, principal: Principal, thread_id: str, change: str | None) -> ApprovalResult:
        """Approve the thread's held plan and pushes (or the one push ``change``) as its owner."""
        thread = await self._threads.visible(principal, thread_id)
        if not is_owner(thread, user_id=principal.user_id):
            raise Forbidden("only this thread's owner can approve its plan or held pushes")
        approved = await self._approvals.approve(thread_id, by=principal.user_id, change=change)
        if approved.anything:
            await announce(self._bus, thread_id, approved, by=principal.user_id, via="dashboard")
            await self._threads.post(principal, thread_id, approval_text(approved))
        return ApprovalResult(
            plan=approved.plan.revision if approved.plan else None, pushes=[hold.change for hold in approved.pushes]
        )
