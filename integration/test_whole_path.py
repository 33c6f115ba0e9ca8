"""The whole path on real pods (issue 18, item 3), on a cluster reached through ``KUBECONFIG``:
Drydock installed with Helm from a fresh start, the GitHub, git and model doubles on this
machine (``integration.cluster.whole_path``). The tests are one scenario and run in order:

1. a signed webhook to the ingress Service → the coder-worker pod takes the wake → a sandbox pod
   made by the Kubernetes provider → clone and push through the credential-proxy pod → a pull
   request and a reply on the GitHub double;
2. the reviewer-worker pod reviews that pull request;
3. the coder-worker pod deleted with ``--grace-period=0 --force`` in the middle of a run: its
   replacement resumes from the checkpoint; one pull request; each follow-up seen once;
4. the thread's sandbox pod deleted between turns: the next turn recreates it from the
   workspace snapshot, the unpushed commit included;
5. the warm pool: a new thread runs in the pod the pool started before it existed;
6. the boundary, tried from inside a sandbox pod by the agent's ``execute`` tool: the control
   plane, the Kubernetes API, a sibling sandbox's daemon, the web services and the release's
   secrets (``integration.cluster.sandbox_probe``).

Skips, saying why, without ``KUBECONFIG``, helm, or this machine's address for the pods
(``DRYDOCK_IT_HOST_ADDRESS``, the lab bridge's gateway 10.244.77.1 by default).
"""

from __future__ import annotations

import base64
import json
import shlex
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from drydock.accounts import RepositorySettings
from drydock.embedded import REDIS_USER
from drydock.sandbox.providers.kubernetes.manifests import SECRET_DIRECTORY, TOKEN_DIRECTORY
from drydock.threads import ids
from drydock.threads.pr_records import PullRequestStore, branch_name
from integration.cluster.release import ClusterUnavailable, Release, kubectl
from integration.cluster.whole_path import MEMBER, ORG, REPOSITORY, ClusterStage, cluster_stage
from tests.fakes.git_server import git, isolated_git_env
from tests.fakes.github import webhooks
from tests.fakes.github.activity import activity_of
from tests.fakes.github.reviews import files_from_diff, reviews_of, set_files
from tests.fakes.openai_server import Script
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(2400)
RELEASE = Release("drydock-path", "drydock-path", "drydock-path-infra", "drydock-path-sandboxes")
RUN_WITHIN = 300.0
"""Seconds a run may take on a loaded 2-core node (a sandbox pod start, a clone, the tests)."""
TAKEOVER_WITHIN = 420.0
"""Seconds for a replacement worker pod to start, take the wake over and finish the run."""


def _thread(number: int) -> str:
    return ids.github_issue("github.com", ORG, "widgets", number)


def _fix(branch: str) -> str:
    return (
        f"cd widgets && git checkout -q -b {branch} && sed -i 's/a - b/a + b/' calc.py && python3 -m unittest -q "
        f"&& git commit -qam 'Fix add()' && git push -q -u origin {branch} && git log -1 --format=%an"
    )


FIX_ISSUE = 7
FIX_BRANCH = branch_name(_thread(FIX_ISSUE), "fix add")
CRASH_ISSUE = 11
CRASH_BRANCH = branch_name(_thread(CRASH_ISSUE), "fix add")
SNAPSHOT_ISSUE = 13
WARM_ISSUE = 17
PROBE_ISSUE = 19
PROBE = Path(__file__).parent / "cluster" / "sandbox_probe.py"


@pytest.fixture(scope="module")
async def stage(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ClusterStage]:
    try:
        async with cluster_stage(tmp_path_factory.mktemp("whole-path"), RELEASE) as running:
            print(f"release installed in {running.timings['install']:.0f} s")
            yield running
    except ClusterUnavailable as reason:
        pytest.skip(str(reason))


def _running(pod: dict[str, Any]) -> bool:
    return pod["status"].get("phase") == "Running" and "deletionTimestamp" not in pod["metadata"]


def _tool_results(stage: ClusterStage, marker: str) -> list[str]:
    last = stage.requests_of(marker)[-1]
    return [str(message["content"]) for message in last.messages if message["role"] == "tool"]


class TestWholePathOnPods:
    async def test_a_webhook_ends_in_a_pull_request_and_a_reply_made_from_a_sandbox_pod(
        self, stage: ClusterStage
    ) -> None:
        marker = "[path: fix]"
        stage.conversations.add(
            marker,
            Script()
            .tool_call("execute", command=f"{_fix(FIX_BRANCH)} && git ls-remote --get-url origin")
            .tool_call("open_pull_request", title="Fix add()", body=f"Fixes #{FIX_ISSUE}.", head=FIX_BRANCH)
            .tool_call("github_comment", body="I fixed `add()` and opened a pull request.")
            .reply("Fixed add(), opened the pull request and replied on the issue."),
        )
        thread = _thread(FIX_ISSUE)
        response = await stage.deliver_github(
            "issue_comment", stage.mention(FIX_ISSUE, f"@drydock please fix add() {marker}")
        )
        assert response.status_code == 200, response.text
        await eventually(lambda: stage.completed(thread), every=0.25, within=RUN_WITHIN, what="the run to complete")

        pulls = stage.github.state.pulls_of(REPOSITORY)
        assert [(pull.head_ref, pull.base_ref, pull.title) for pull in pulls] == [(FIX_BRANCH, "main", "Fix add()")]
        record = await PullRequestStore(stage.runtime.redis, stage.runtime.keys).find(
            "github.com", REPOSITORY, pulls[0].number
        )
        assert record is not None
        assert record.thread_id == thread
        comments = activity_of(stage.github.state).comments_on(REPOSITORY, FIX_ISSUE)
        assert [c.rendered for c in comments if c.login != MEMBER] == ["I fixed `add()` and opened a pull request."]

        # The push reached the upstream through the credential proxy, with an installation token
        # the proxy holds (the sandbox has none), as the app's bot.
        env = isolated_git_env(stage.root)
        upstream = str(stage.git.repository_path(REPOSITORY))
        log = await git("--git-dir", upstream, "log", "-1", "--format=%an|%s", FIX_BRANCH, env=env)
        assert log.strip() == "Drydock|Fix add()"
        assert "return a + b" in await git("--git-dir", upstream, "show", f"{FIX_BRANCH}:calc.py", env=env)
        pushes = [seen for seen in stage.git.requests if seen.path.endswith("git-receive-pack")]
        assert pushes
        assert all(seen.token in stage.github.state.tokens for seen in pushes)
        executed = _tool_results(stage, marker)[0]
        assert "OK" in executed, "the tests ran and passed in the sandbox pod"
        proxy = f"http://{RELEASE.name}-credential-proxy.{RELEASE.namespace}.svc.cluster.local:8081/"
        assert proxy in executed, f"git in the sandbox pod goes to the credential-proxy Service: {executed}"
        assert not any(token in executed for token in stage.github.state.tokens)

        # The run happened in a pod of the provider's making, and the coder-worker pod ran it.
        sandbox_id = await stage.sandbox_id(thread)
        assert sandbox_id is not None
        pods = stage.sandbox_pods(f"drydock.dev/sandbox={sandbox_id}")
        assert len(pods) == 1, [pod["metadata"]["name"] for pod in pods]
        assert _running(pods[0])
        assert thread in stage.logs("coder-worker")

    async def test_the_reviewer_pod_reviews_the_agents_pull_request(self, stage: ClusterStage) -> None:
        pull = stage.github.state.pulls_of(REPOSITORY)[0]
        env = isolated_git_env(stage.root)
        upstream = str(stage.git.repository_path(REPOSITORY))
        sha = (await git("--git-dir", upstream, "rev-parse", FIX_BRANCH, env=env)).strip()
        # GitHub keeps every pull request's head under refs/pull/N/head and lists its files.
        await git("--git-dir", upstream, "update-ref", f"refs/pull/{pull.number}/head", sha, env=env)
        diff = await git("--git-dir", upstream, "diff", f"main...{FIX_BRANCH}", env=env)
        set_files(stage.github.state, REPOSITORY, pull.number, files_from_diff(diff))
        pull.head_sha = sha
        stage.conversations.review = (
            Script()
            .tool_call("list_findings")
            .tool_call(
                "add_finding", severity="medium", confidence=0.8, category="tests", title="No test for negatives",
                path="calc.py", start_line=2, description="`add(-1, 1)` is not tested.",
            )
            .tool_call("publish_review", summary="One gap in the tests.")
            .reply("Reviewed: one finding posted.")
        )  # fmt: skip
        await stage.accounts.save_repository(RepositorySettings(full_name=REPOSITORY, reviewer=True))
        opened = webhooks.pull_request(
            ORG, "widgets", pull.number, "opened", author=webhooks.user(f"{stage.app.slug}[bot]", kind="Bot"),
            head_ref=FIX_BRANCH, head_sha=sha, title=pull.title, installation_id=stage.installation.id,
        )  # fmt: skip
        response = await stage.deliver_github("pull_request", opened)
        assert response.status_code == 200, response.text

        thread = ids.reviewer("github.com", ORG, "widgets", pull.number)
        await eventually(lambda: stage.completed(thread), every=0.25, within=RUN_WITHIN, what="the review to complete")
        reviews = list(reviews_of(stage.github.state).reviews.values())
        assert [(review.commit_id, "One gap in the tests." in review.body) for review in reviews] == [(sha, True)]
        placed = [p for p in reviews_of(stage.github.state).placements.values() if p.review_id == reviews[0].id]
        assert [(p.path, p.line) for p in placed] == [("calc.py", 2)]
        assert thread in stage.logs("reviewer-worker")
        await stage.accounts.save_repository(RepositorySettings(full_name=REPOSITORY, reviewer=False))

    async def test_a_coder_worker_pod_killed_mid_run_is_replaced_and_the_run_resumes_once(
        self, stage: ClusterStage
    ) -> None:
        marker = "[path: crash]"
        stage.conversations.add(
            marker,
            Script()
            .tool_call("execute", command=_fix(CRASH_BRANCH))
            # The answer the killed pod never receives.
            .tool_call("open_pull_request", title="Fix add()", head=CRASH_BRANCH, latency=600)
            .tool_call("open_pull_request", title="Fix add()", body=f"Fixes #{CRASH_ISSUE}.", head=CRASH_BRANCH)
            .tool_call("github_comment", body="Opened the pull request.")
            .reply("Done."),
        )
        thread = _thread(CRASH_ISSUE)
        before = {pod["metadata"]["name"] for pod in stage.service_pods("coder-worker")}
        await stage.deliver_github("issue_comment", stage.mention(CRASH_ISSUE, f"@drydock please fix add() {marker}"))
        await eventually(
            lambda: len(stage.requests_of(marker)) >= 2,
            every=0.25,
            within=RUN_WITHIN,
            what="the run's second model call",
        )
        for name in before:
            kubectl("-n", RELEASE.namespace, "delete", "pod", name, "--grace-period=0", "--force", "--wait=false")
        await stage.deliver_github(
            "issue_comment", stage.mention(CRASH_ISSUE, "@drydock and mention the issue in the PR")
        )
        await eventually(
            lambda: stage.completed(thread), every=0.25, within=TAKEOVER_WITHIN, what="the resumed run to complete"
        )

        after = [pod for pod in stage.service_pods("coder-worker") if _running(pod)]
        assert after
        assert not {pod["metadata"]["name"] for pod in after} & before, "a new pod ran the rest"
        pulls = [pull for pull in stage.github.state.pulls_of(REPOSITORY) if pull.head_ref == CRASH_BRANCH]
        assert len(pulls) == 1
        requests = stage.requests_of(marker)
        conversation = requests[-1].texts("user")
        assert sum("please fix add()" in text for text in conversation) == 1
        assert sum("mention the issue in the PR" in text for text in conversation) == 1
        pushed = [m for m in requests[-1].messages if m["role"] == "tool" and "Drydock" in str(m["content"])]
        assert len(pushed) == 1, "the resumed run did not repeat the work done before the kill"
        assert len(requests) == 5

    async def test_a_sandbox_pod_deleted_between_turns_is_recreated_from_the_snapshot(
        self, stage: ClusterStage
    ) -> None:
        marker = "[path: snapshot]"
        stage.conversations.add(
            marker,
            Script()
            .tool_call(
                "execute",
                command="cd widgets && git checkout -q -b notes && printf 'kept across pods\\n' > NOTES.md "
                "&& git add NOTES.md && git commit -qm 'Add notes (not pushed)' && echo committed",
            )
            .reply("Committed the notes locally.")
            .tool_call("execute", command="cd widgets && git log -1 --format=%s && cat NOTES.md && hostname")
            .reply("The notes are still there."),
        )
        thread = _thread(SNAPSHOT_ISSUE)
        await stage.deliver_github("issue_comment", stage.mention(SNAPSHOT_ISSUE, f"@drydock take notes {marker}"))
        await eventually(lambda: stage.completed(thread), every=0.25, within=RUN_WITHIN, what="the first turn")
        first_id = await stage.sandbox_id(thread)
        assert first_id is not None
        [first_pod] = stage.sandbox_pods(f"drydock.dev/sandbox={first_id}")
        kubectl("-n", RELEASE.sandbox_namespace, "delete", "pod", first_pod["metadata"]["name"], "--wait=true")

        await stage.deliver_github(
            "issue_comment", stage.mention(SNAPSHOT_ISSUE, "@drydock are the notes still there?")
        )
        await eventually(lambda: stage.completed(thread, runs=2), every=0.25, within=RUN_WITHIN, what="the second turn")
        output = _tool_results(stage, marker)[-1]
        assert "Add notes (not pushed)" in output, output
        assert "kept across pods" in output, output
        second_id = await stage.sandbox_id(thread)
        [second_pod] = stage.sandbox_pods(f"drydock.dev/sandbox={second_id}")
        assert second_pod["metadata"]["uid"] != first_pod["metadata"]["uid"]
        assert second_pod["metadata"]["name"] in output, "the second turn ran in the new pod"

    async def test_a_new_thread_claims_the_pod_the_warm_pool_started(self, stage: ClusterStage) -> None:
        idle_key = stage.runtime.keys.warm_pool_idle(RELEASE.sandbox_namespace)

        async def idle() -> set[str] | None:
            """The sandboxes (pods) the pool holds ready to be claimed, once it holds one."""
            return {str(name) for name in await stage.runtime.redis.lrange(idle_key, 0, -1)} or None

        names = await eventually(idle, every=0.25, within=RUN_WITHIN, what="an idle warm-pool pod")
        for name in names:
            [pod] = stage.sandbox_pods(f"drydock.dev/sandbox={name}")
            assert _running(pod)
            assert "drydock.dev/thread" not in pod["metadata"]["labels"], "started for no thread"
        marker = "[path: warm]"
        stage.conversations.add(marker, Script().tool_call("execute", command="hostname").reply("Ran in my sandbox."))
        thread = _thread(WARM_ISSUE)
        await stage.deliver_github("issue_comment", stage.mention(WARM_ISSUE, f"@drydock where do you run? {marker}"))
        await eventually(lambda: stage.completed(thread), every=0.25, within=RUN_WITHIN, what="the run in a warm pod")
        hostname = _tool_results(stage, marker)[-1].strip().splitlines()[0]
        claimed = await stage.sandbox_id(thread)
        [pod] = stage.sandbox_pods(f"drydock.dev/sandbox={claimed}")
        assert pod["metadata"]["name"] == hostname
        labels = pod["metadata"]["labels"]
        assert hostname in names, (hostname, names, labels)
        assert labels["drydock.dev/origin"] == "warm-pool"
        print(json.dumps({"claimed warm pod": hostname}))

    async def test_a_sandbox_pod_reaches_no_credential_and_no_service_that_would_answer_it(
        self, stage: ClusterStage
    ) -> None:
        """Each attempt fails if it succeeds. The lab's bridge network does not enforce
        NetworkPolicies, so there the sandbox pod reaches Valkey and NATS and the servers' own
        authentication refuses it; on a cluster that enforces the chart's policy the connection
        itself fails. Both count as refused; what answered is printed."""
        siblings = [pod for pod in stage.sandbox_pods() if _running(pod)]
        assert siblings, "a sandbox pod of an earlier step, or the warm pool's"
        sibling = siblings[0]
        [daemon_port] = [port["containerPort"] for port in sibling["spec"]["containers"][0]["ports"]]
        web = f"{RELEASE.namespace}.svc.cluster.local"
        targets = {
            "valkey": [f"valkey.{RELEASE.infra_domain}", 6379],
            "nats": [f"nats.{RELEASE.infra_domain}", 4222],
            "redis_user": REDIS_USER,
            "nats_user": "ingress",
            "sibling_daemon": [sibling["status"]["podIP"], daemon_port],
            "kubernetes_paths": [
                f"/api/v1/namespaces/{RELEASE.namespace}/secrets",
                f"/api/v1/namespaces/{RELEASE.sandbox_namespace}/pods",
            ],
            "web": {
                "unsigned webhook": [f"{RELEASE.name}-ingress.{web}", 8000, "POST", "/webhooks/github"],
                "dashboard without a session": [f"{RELEASE.name}-dashboard.{web}", 8000, "GET", "/api/v1/me"],
            },
            "secret_directories": [SECRET_DIRECTORY, TOKEN_DIRECTORY],
        }
        source = base64.b64encode(PROBE.read_bytes()).decode()
        command = f'python3 -c "$(printf %s {source} | base64 -d)" {shlex.quote(json.dumps(targets))}'
        marker = "[path: probe]"
        stage.conversations.add(marker, Script().tool_call("execute", command=command).reply("Probed."))
        thread = _thread(PROBE_ISSUE)
        await stage.deliver_github("issue_comment", stage.mention(PROBE_ISSUE, f"@drydock look around {marker}"))
        await eventually(lambda: stage.completed(thread), every=0.25, within=RUN_WITHIN, what="the probe's run")
        sandbox_id = await stage.sandbox_id(thread)
        assert sandbox_id is not None
        assert sandbox_id != sibling["metadata"]["name"]
        [pod] = stage.sandbox_pods(f"drydock.dev/sandbox={sandbox_id}")
        context = pod["spec"]["securityContext"]
        output = _tool_results(stage, marker)[-1]
        found = json.loads(next(line for line in output.splitlines() if line.startswith("{")))

        identity = found["identity"]
        assert (identity["uid"], identity["gid"]) == (context["runAsUser"], context["runAsGroup"])
        assert identity["uid"] != 0
        assert (int(identity["CapEff"], 16), int(identity["CapPrm"], 16)) == (0, 0), identity
        assert identity["NoNewPrivs"] == "1", identity
        assert identity["Seccomp"] == "2", "a seccomp filter (RuntimeDefault) applies"
        assert found["service_account"] == [], "no service-account token is mounted"
        assert found["mounted_secrets"] == {SECRET_DIRECTORY: None, TOKEN_DIRECTORY: []}, (
            "the token Secret is mounted only in the init container, and the daemon removed its copy"
        )
        assert "Read-only file system" in found["write_to_the_image"], found["write_to_the_image"]
        for path, answer in found["kubernetes_api"].items():
            assert answer in {"401", "403"} or not answer.isdigit(), f"{path}: {answer}"

        valkey = found["valkey"]
        if valkey["connected"]:
            assert [reply.split()[0] for reply in valkey["replies"]] == ["-NOAUTH", "-NOAUTH", "-WRONGPASS"], valkey
        for name in ("nats", "nats_guessed_user"):
            nats = found[name]
            if nats["connected"]:
                assert "Authorization Violation" in nats["replies"][0], nats
        assert found["sibling_daemon"] == {"no_token": "401", "made_up_token": "401"}, found["sibling_daemon"]
        assert found["web"] == {"unsigned webhook": "401", "dashboard without a session": "401"}, found["web"]

        seen = "\n".join(found["processes"])
        secrets = {
            "the Valkey password": RELEASE.redis_password,
            "the encryption key": RELEASE.encryption_key,
            "the webhook secret": RELEASE.webhook_secret,
            "the GitHub App's private key": stage.app.private_key_pem.splitlines()[1],
            **{f"the NATS password of {user}": password for user, password in RELEASE.nats_passwords.items()},
            **{f"installation token {token[:6]}…": token for token in stage.github.state.tokens},
        }
        assert "drydock.sandbox.daemon" in seen, "the daemon's process was among those read"
        assert [name for name, value in secrets.items() if value and value in seen] == []
        print(
            json.dumps(
                {
                    "refused by": {
                        "valkey": "its ACL" if valkey["connected"] else "the network",
                        "nats": "its authorization" if found["nats"]["connected"] else "the network",
                    },
                    "kubernetes API": found["kubernetes_api"],
                }
            )
        )
