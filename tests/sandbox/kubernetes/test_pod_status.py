"""Reading a pod's status: running with its IP, still starting and why, or failed and why."""

from __future__ import annotations

from typing import Any

from drydock.sandbox.providers.kubernetes.pod_status import Phase, PodState, pod_state


def pod(status: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    return {"metadata": {"name": "sbx-1"} | metadata, "status": status}


def container(name: str, state: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "state": state}


class TestRunning:
    def test_running_with_an_ip_and_the_daemon_running(self) -> None:
        status = {
            "phase": "Running",
            "podIP": "10.1.2.3",
            "containerStatuses": [container("daemon", {"running": {"startedAt": "now"}})],
        }
        assert pod_state(pod(status)) == PodState(Phase.RUNNING, ip="10.1.2.3")

    def test_running_phase_without_ip_is_still_starting(self) -> None:
        status = {"phase": "Running", "containerStatuses": [container("daemon", {"running": {}})]}
        assert pod_state(pod(status)).phase is Phase.STARTING


class TestStarting:
    def test_unschedulable_keeps_the_schedulers_message(self) -> None:
        status = {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes fit"}
            ],
        }
        assert pod_state(pod(status)) == PodState(Phase.STARTING, "not scheduled: 0/3 nodes fit")

    def test_container_creating_is_starting(self) -> None:
        status = {
            "phase": "Pending",
            "containerStatuses": [container("daemon", {"waiting": {"reason": "ContainerCreating"}})],
        }
        assert pod_state(pod(status)) == PodState(Phase.STARTING, "container daemon waiting: ContainerCreating")
        assert pod_state({"metadata": {}}) == PodState(Phase.STARTING, "pod pending")


class TestFailed:
    def test_image_pull_errors_fail_at_once_with_the_message(self) -> None:
        for reason in ("ErrImagePull", "ImagePullBackOff", "InvalidImageName"):
            status = {
                "phase": "Pending",
                "containerStatuses": [container("daemon", {"waiting": {"reason": reason, "message": "not found"}})],
            }
            assert pod_state(pod(status)) == PodState(Phase.FAILED, f"container daemon: {reason}: not found")

    def test_a_failed_init_container_fails_the_pod(self) -> None:
        status = {
            "phase": "Pending",
            "initContainerStatuses": [container("token", {"terminated": {"exitCode": 1, "reason": "Error"}})],
        }
        assert pod_state(pod(status)) == PodState(Phase.FAILED, "init container token exited with 1 (Error)")

    def test_deadline_exceeded_and_evictions_say_so(self) -> None:
        status = {"phase": "Failed", "reason": "DeadlineExceeded", "message": "Pod was active too long"}
        assert pod_state(pod(status)) == PodState(Phase.FAILED, "pod failed: DeadlineExceeded: Pod was active too long")

    def test_a_terminated_daemon_reports_its_exit(self) -> None:
        status = {
            "phase": "Failed",
            "containerStatuses": [container("daemon", {"terminated": {"exitCode": 137, "reason": "OOMKilled"}})],
        }
        assert pod_state(pod(status)) == PodState(
            Phase.FAILED, "pod failed: container daemon exited with 137 (OOMKilled)"
        )

    def test_a_pod_being_deleted_is_failed(self) -> None:
        assert pod_state(pod({"phase": "Running"}, deletionTimestamp="2026-01-01T00:00:00Z")).phase is Phase.FAILED
