"""One trace from a webhook to the run's model calls, its tool call, the sandbox daemon and the
credential proxy, recorded in memory with the SDK's own exporter."""

from __future__ import annotations

from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind

from drydock.threads import ids
from tests.e2e.pipeline import ORG, pipeline
from tests.e2e.test_github_issue import ISSUE, completed, mention
from tests.fakes.openai_server import Script
from tests.telemetry.spans import attribute, named, parent_id, recorded_spans, span_id, trace_id, traceparent_of
from tests.waiting import eventually

SHOW_AND_FETCH = "printenv TRACEPARENT && cd widgets && git fetch -q origin && echo fetched"
GIT_ROUTE = "/g/{grant}/git/{owner}/{name}/{endpoint}"


def _children(spans: list[ReadableSpan], parent: ReadableSpan, *, kind: SpanKind | None = None) -> list[ReadableSpan]:
    return [span for span in spans if parent_id(span) == span_id(parent) and (kind is None or span.kind is kind)]


def _one(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    found = named(spans, name)
    assert len(found) == 1, (name, [span.name for span in spans])
    return found[0]


class TestOneTrace:
    async def test_a_webhook_its_wake_run_model_and_tool_calls_daemon_and_proxy_are_one_trace(
        self, tmp_path: Path
    ) -> None:
        script = Script().tool_call("execute", command=SHOW_AND_FETCH).reply("Fetched.")
        thread_id = ids.github_issue("github.com", ORG, "widgets", ISSUE)
        with recorded_spans() as recording:
            async with pipeline(tmp_path, script) as stage:
                response = await stage.deliver_github("issue_comment", mention(stage, "@drydock fetch"))
                assert response.status_code == 200, response.text
                await eventually(lambda: completed(stage, thread_id), within=60, what="the run to complete")

                async def wake_ended() -> bool:
                    return bool(named(list(recording.spans()), "wake coder"))

                await eventually(wake_ended, what="the wake's span to end (its acknowledgement)")
                model_requests = list(stage.model.requests)

        [ingress] = [span for span in recording.spans() if span.name == "POST /webhooks/github"]
        assert ingress.kind is SpanKind.SERVER
        spans = [span for span in recording.spans() if trace_id(span) == trace_id(ingress)]

        # The ingress published the message to the inbox, then the wake, inside the request's span.
        published = {span.name: span for span in _children(spans, ingress, kind=SpanKind.PRODUCER)}
        assert {"publish drydock.inbox", "publish drydock.run"} <= set(published)
        wake = _one(spans, "wake coder")
        assert (wake.kind, parent_id(wake)) == (SpanKind.CONSUMER, span_id(published["publish drydock.run"]))
        assert attribute(wake, "drydock.thread_id") == thread_id
        run = _one(spans, "run coder")
        assert parent_id(run) == span_id(wake)

        # Two model calls of the run, each with the HTTP request the model endpoint received.
        models = [span for span in spans if span.name.startswith("chat ")]
        assert [parent_id(span) for span in models] == [span_id(run)] * 2
        requests = [_one(_children(spans, model, kind=SpanKind.CLIENT), "POST") for model in models]
        received = [request.headers["traceparent"].rsplit("-", 1)[0] for request in model_requests]
        assert received == [traceparent_of(request) for request in requests]

        # The tool call, its request to the sandbox daemon, and the command that request ran.
        tool = _one(spans, "execute_tool execute")
        assert parent_id(tool) == span_id(run)
        [daemon_call] = _children(spans, tool, kind=SpanKind.CLIENT)
        assert str(attribute(daemon_call, "url.full") or attribute(daemon_call, "http.url")).endswith("/exec")
        output = model_requests[1].messages[-1]["content"]
        assert traceparent_of(daemon_call) in output
        assert "fetched" in output

        # The command's git fetch reached the credential proxy inside the same trace.
        proxied = _children(spans, daemon_call, kind=SpanKind.SERVER)
        assert proxied
        assert {span.name.split(" ", 1)[1] for span in proxied} == {GIT_ROUTE}
        # So did the run's clone, before the first model call.
        clones = [
            span
            for span in spans
            if span.kind is SpanKind.SERVER and span.name.endswith(GIT_ROUTE) and span not in proxied
        ]
        assert clones
