"""The chart's ``helm test`` pod (templates/tests/round-trip.yaml): run on the lab by
integration/test_cluster.py; here, what it checks is pinned on the rendered output."""

from __future__ import annotations

from tests.chart.conftest import Manifest


def _test_pod(manifests: list[Manifest]) -> Manifest:
    (pod,) = [m for m in manifests if m["kind"] == "Pod" and m["metadata"].get("annotations", {}).get("helm.sh/hook")]
    return pod


class TestHelmTest:
    def test_it_is_a_test_hook_without_an_api_token(self, manifests: list[Manifest]) -> None:
        pod = _test_pod(manifests)
        assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
        assert pod["spec"]["automountServiceAccountToken"] is False
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True

    def test_it_checks_every_web_service_and_the_webhook_path(self, manifests: list[Manifest]) -> None:
        pod = _test_pod(manifests)
        (container,) = pod["spec"]["containers"]
        env = {e["name"]: e for e in container["env"]}
        web = {
            m["metadata"]["name"]: m["spec"]["ports"][0]["port"]
            for m in manifests
            if m["kind"] == "Service" and m["metadata"]["namespace"] == "drydock"
        }
        assert web, "no web Service rendered"
        assert set(env["READY_URLS"]["value"].split()) == {
            f"http://{name}.drydock.svc.cluster.local:{port}/readyz" for name, port in web.items()
        }
        assert (
            env["INGRESS_URL"]["value"] == f"http://drydock-ingress.drydock.svc.cluster.local:{web['drydock-ingress']}"
        )
        assert env["WEBHOOK_SECRET"]["valueFrom"]["secretKeyRef"]["optional"] is True
        script = container["command"][-1]
        assert "forged.status_code != 401" in script
        assert "/webhooks/github" in script
