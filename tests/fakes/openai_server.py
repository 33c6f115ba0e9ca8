"""A scripted OpenAI-compatible model server, so tests exercise the real ``ChatOpenAI`` client
(headers, retries, timeouts, reasoning arguments, streaming) against a loopback endpoint.

A scenario is a script, one step per HTTP request, read in order::

    script = Script().tool_call("execute", command="pytest -q").fail(500).reply("done")
    async with ScriptedModelServer(script) as server:
        model = ChatOpenAI(model="gpt-5.1", base_url=server.base_url, api_key="k")

A failed step consumes one request, so a client retry consumes the next step. Scripts can be
given per model id (``scripts={"gpt-5.1": ...}``); a request for a model without its own script
reads the default one. A request with no step left is answered 400 and recorded in
:attr:`ScriptedModelServer.unscripted`. Every request is recorded in
:attr:`ScriptedModelServer.requests`.

Responses have the real shapes: ``chat.completion`` objects with ``tool_calls`` and ``usage``,
``chat.completion.chunk`` server-sent events ending in ``[DONE]`` (with a usage chunk when
``stream_options.include_usage`` is set), and ``{"error": {...}}`` bodies with OpenAI's
status codes and error types.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from tests.fakes.loopback import LoopbackServer


@dataclass(frozen=True)
class ScriptedCall:
    name: str
    arguments: str
    """The JSON text sent as ``function.arguments`` (not necessarily valid JSON)."""


@dataclass(frozen=True)
class Usage:
    """Token counts a step reports, as OpenAI counts them: ``prompt`` includes ``cached``,
    ``completion`` includes ``reasoning``."""

    prompt: int
    completion: int
    cached: int = 0
    reasoning: int = 0


@dataclass(frozen=True)
class Answer:
    text: str
    calls: tuple[ScriptedCall, ...] = ()
    latency: float | None = None
    usage: Usage | None = None
    """Reported as given; None: counts estimated from the request's and answer's length."""


@dataclass(frozen=True)
class Failure:
    status: int
    message: str
    type: str
    code: str | None
    retry_after: float | None = None
    latency: float | None = None


Step = Answer | Failure

_ERRORS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    403: ("invalid_request_error", "unsupported_country_region_territory", "Request not allowed."),
    404: ("invalid_request_error", "model_not_found", "The model does not exist or you do not have access to it."),
    408: ("timeout", None, "Request timed out."),
    409: ("invalid_request_error", None, "Conflict."),
    422: ("invalid_request_error", None, "Unprocessable request."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for requests. Please try again later."),
    500: ("server_error", None, "The server had an error while processing your request. Sorry about that!"),
    502: ("server_error", None, "Bad gateway."),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
}


def _failure(
    status: int, message: str | None = None, *, retry_after: float | None = None, latency: float | None = None
) -> Failure:
    error_type, code, default_message = _ERRORS.get(status, ("server_error", None, f"HTTP {status}"))
    return Failure(status, message or default_message, error_type, code, retry_after, latency)


class Script:
    """Steps the server answers with, in order; each builder method appends one and returns the script."""

    def __init__(self) -> None:
        self._steps: deque[Step] = deque()

    def tool_call(self, tool: str, /, *, latency: float | None = None, **arguments: Any) -> Script:
        """An assistant message calling ``tool`` with ``arguments``."""
        return self.tool_calls((tool, arguments), latency=latency)

    def tool_calls(self, *calls: tuple[str, Mapping[str, Any]], text: str = "", latency: float | None = None) -> Script:
        """An assistant message with several (parallel) tool calls and optional text."""
        scripted = tuple(ScriptedCall(name, json.dumps(dict(arguments))) for name, arguments in calls)
        self._steps.append(Answer(text, scripted, latency))
        return self

    def tool_call_raw(self, tool: str, arguments: str, /, *, latency: float | None = None) -> Script:
        """A tool call whose ``arguments`` text is sent verbatim (e.g. malformed JSON)."""
        self._steps.append(Answer("", (ScriptedCall(tool, arguments),), latency))
        return self

    def reply(self, text: str, /, *, latency: float | None = None) -> Script:
        """A final assistant message with ``text`` and no tool calls."""
        self._steps.append(Answer(text, (), latency))
        return self

    def usage(self, *, prompt: int, completion: int, cached: int = 0, reasoning: int = 0) -> Script:
        """The last step (an answer) reports these token counts in its ``usage``."""
        last = self._steps.pop()
        if not isinstance(last, Answer):
            raise ValueError("only an answer reports usage")
        self._steps.append(dataclasses.replace(last, usage=Usage(prompt, completion, cached, reasoning)))
        return self

    def empty(self, *, latency: float | None = None) -> Script:
        """An assistant message with neither text nor tool calls."""
        self._steps.append(Answer("", (), latency))
        return self

    def fail(
        self,
        status: int,
        /,
        message: str | None = None,
        *,
        retry_after: float | None = None,
        latency: float | None = None,
    ) -> Script:
        """An error response with OpenAI's body for ``status``; ``retry_after`` (seconds) sets the
        ``retry-after`` and ``retry-after-ms`` headers the client honours."""
        self._steps.append(_failure(status, message, retry_after=retry_after, latency=latency))
        return self

    @property
    def remaining(self) -> int:
        return len(self._steps)

    def next_step(self) -> Step | None:
        return self._steps.popleft() if self._steps else None


@dataclass(frozen=True)
class ReceivedRequest:
    """One request as the server received it."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    received_at: float = field(default_factory=time.monotonic)
    """``time.monotonic()`` when the request arrived."""

    @property
    def model(self) -> str:
        return str(self.body.get("model"))

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))

    @property
    def tool_names(self) -> list[str]:
        return [tool["function"]["name"] for tool in self.body.get("tools", []) if tool.get("type") == "function"]

    def texts(self, role: str | None = None) -> list[str]:
        """The text of each message (of ``role``), content parts joined."""
        found = []
        for message in self.messages:
            if role is not None and message.get("role") != role:
                continue
            content = message.get("content")
            if isinstance(content, list):
                content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
            found.append(content or "")
        return found


Responder = Callable[[ReceivedRequest], Script | None]
"""Chooses the answer from the request itself (its first step is used); ``None`` falls back to
the scripts. For many concurrent conversations, whose requests interleave in any order."""


@dataclass
class _State:
    default: Script
    scripts: dict[str, Script]
    latency: float
    api_key: str | None
    responder: Responder | None = None
    requests: list[ReceivedRequest] = field(default_factory=list)
    received: int = 0
    unscripted: list[ReceivedRequest] = field(default_factory=list)
    arrived: asyncio.Condition = field(default_factory=asyncio.Condition)


def _error_response(failure: Failure, request_id: str) -> JSONResponse:
    headers = {"x-request-id": request_id}
    if failure.retry_after is not None:
        headers["retry-after"] = str(max(1, round(failure.retry_after)))
        headers["retry-after-ms"] = str(int(failure.retry_after * 1000))
    body = {"error": {"message": failure.message, "type": failure.type, "param": None, "code": failure.code}}
    return JSONResponse(body, status_code=failure.status, headers=headers)


def _usage(body: dict[str, Any], answer: Answer) -> dict[str, Any]:
    usage = answer.usage or Usage(
        prompt=max(1, len(json.dumps(body.get("messages", []))) // 4),
        completion=max(1, (len(answer.text) + sum(len(c.name) + len(c.arguments) for c in answer.calls)) // 4),
    )
    return {
        "prompt_tokens": usage.prompt,
        "completion_tokens": usage.completion,
        "total_tokens": usage.prompt + usage.completion,
        "prompt_tokens_details": {"cached_tokens": usage.cached, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": usage.reasoning,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _tool_calls(answer: Answer, first_id: int) -> list[dict[str, Any]]:
    return [
        {"id": f"call_{first_id}_{index}", "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for index, c in enumerate(answer.calls)
    ]


def _completion(body: dict[str, Any], answer: Answer, number: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text or None, "refusal": None}
    if answer.calls:
        message["tool_calls"] = _tool_calls(answer, number)
    elif not answer.text:
        message["content"] = ""
    return {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model"),
        "system_fingerprint": "fp_scripted",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if answer.calls else "stop",
            }
        ],
        "usage": _usage(body, answer),
    }


async def _chunks(body: dict[str, Any], answer: Answer, number: int) -> AsyncIterator[str]:
    base = {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model"),
        "system_fingerprint": "fp_scripted",
    }

    def event(delta: dict[str, Any], finish_reason: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return f"data: {json.dumps({**base, 'choices': [choice]})}\n\n"

    yield event({"role": "assistant", "content": "", "refusal": None})
    for start in range(0, len(answer.text), 16):
        yield event({"content": answer.text[start : start + 16]})
    for index, call in enumerate(_tool_calls(answer, number)):
        opening = {"index": index, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"]}}
        yield event({"tool_calls": [{**opening, "function": {**opening["function"], "arguments": ""}}]})
        arguments = call["function"]["arguments"]
        for start in range(0, len(arguments), 16):
            piece = {"index": index, "function": {"arguments": arguments[start : start + 16]}}
            yield event({"tool_calls": [piece]})
    yield event({}, "tool_calls" if answer.calls else "stop")
    if (body.get("stream_options") or {}).get("include_usage"):
        yield f"data: {json.dumps({**base, 'choices': [], 'usage': _usage(body, answer)})}\n\n"
    yield "data: [DONE]\n\n"


async def _wait(request: Request, seconds: float) -> None:
    """Sleep ``seconds``, returning early when the client has gone (so shutdown never waits)."""
    deadline = asyncio.get_running_loop().time() + seconds
    while (left := deadline - asyncio.get_running_loop().time()) > 0:
        await asyncio.sleep(min(left, 0.02))
        if await request.is_disconnected():
            return


def _create_app(state: _State) -> FastAPI:
    app = FastAPI(title="Scripted OpenAI-compatible model server")

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        body = json.loads(await request.body())
        received = ReceivedRequest(request.url.path, {k.lower(): v for k, v in request.headers.items()}, body)
        state.requests.append(received)
        state.received += 1
        number = state.received
        request_id = f"req_scripted_{number}"
        async with state.arrived:
            state.arrived.notify_all()
        if state.api_key is not None and request.headers.get("authorization") != f"Bearer {state.api_key}":
            return _error_response(_failure(401), request_id)
        script = state.responder(received) if state.responder is not None else None
        step = (script or state.scripts.get(received.model, state.default)).next_step()
        if step is None:
            state.unscripted.append(received)
            message = f"the scripted model server has no step left for request {number} (model {received.model})"
            return _error_response(Failure(400, message, "invalid_request_error", "script_exhausted"), request_id)
        await _wait(request, step.latency if step.latency is not None else state.latency)
        if isinstance(step, Failure):
            return _error_response(step, request_id)
        headers = {"x-request-id": request_id, "openai-processing-ms": "1"}
        if received.stream:
            return StreamingResponse(_chunks(body, step, number), media_type="text/event-stream", headers=headers)
        return JSONResponse(_completion(body, step, number), headers=headers)

    return app


class ScriptedModelServer:
    """``async with ScriptedModelServer(script) as server:`` serves the script at
    ``server.base_url`` (the API root, ending in ``/v1``) on a free loopback port.

    ``latency`` delays every answer without a latency of its own; ``api_key`` makes the server
    answer 401 to requests without ``Authorization: Bearer <api_key>``; ``responder`` picks each
    answer from the request instead of the scripts' order; ``host``: the address to listen on.
    """

    def __init__(
        self,
        script: Script | None = None,
        *,
        scripts: Mapping[str, Script] | None = None,
        latency: float = 0.0,
        api_key: str | None = None,
        responder: Responder | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self._state = _State(script or Script(), dict(scripts or {}), latency, api_key, responder)
        self._server = LoopbackServer(_create_app(self._state), host=host)

    @property
    def base_url(self) -> str:
        return f"{self._server.base_url}/v1"

    @property
    def requests(self) -> list[ReceivedRequest]:
        """Every request received, in order, including failed and unscripted ones."""
        return self._state.requests

    @property
    def received(self) -> int:
        """How many requests arrived, forgotten ones included."""
        return self._state.received

    def forget_requests(self) -> None:
        """Drop the requests kept so far: a long benchmark counts them by :attr:`received` and
        need not hold every conversation it served."""
        self._state.requests.clear()

    @property
    def unscripted(self) -> list[ReceivedRequest]:
        """Requests that arrived after their script ran out."""
        return self._state.unscripted

    async def wait_for_requests(self, count: int) -> None:
        """Return once ``count`` requests have arrived (the last may still be in progress);
        bound the wait with ``asyncio.timeout``."""
        async with self._state.arrived:
            await self._state.arrived.wait_for(lambda: self._state.received >= count)

    def requests_for(self, model: str) -> list[ReceivedRequest]:
        return [request for request in self._state.requests if request.model == model]

    async def __aenter__(self) -> ScriptedModelServer:
        await self._server.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._server.__aexit__(exc_type, exc, tb)
