from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, tool
from pydantic import BaseModel

import drydock.middleware.sanitize_tool_inputs as sanitize
from drydock.middleware.sanitize_tool_inputs import SanitizeToolInputs
from drydock.middleware.tool_errors import ToolErrorsAsMessages
from drydock.redaction import Redactor
from tests.fakes.openai_server import Script, ScriptedModelServer
from tests.middleware.conftest import chat_model


class Shell:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

        @tool
        async def execute(command: str, retries: int = 3) -> str:
            """Run a shell command."""
            self.calls.append((command, retries))
            return f"ran {command!r}"

        self.tool = execute


async def _run(script: Script, shell: Shell) -> tuple[list[ToolMessage], ScriptedModelServer]:
    async with ScriptedModelServer(script) as server:
        agent = create_agent(
            chat_model(server), [shell.tool], middleware=[SanitizeToolInputs(), ToolErrorsAsMessages("t")]
        )
        result = await agent.ainvoke({"messages": [HumanMessage("run the tests")]})
    return [m for m in result["messages"] if isinstance(m, ToolMessage)], server


class TestMalformedArguments:
    async def test_unreadable_arguments_are_answered_with_an_error_and_the_run_goes_on(self) -> None:
        shell = Shell()
        script = Script().tool_call_raw("execute", '{"command": "pytest').reply("resent")

        answers, server = await _run(script, shell)

        assert shell.calls == []
        assert len(answers) == 1
        assert answers[0].status == "error"
        assert "not valid JSON" in answers[0].text
        assert "Send the call again" in answers[0].text
        second = server.requests[1]
        assert any("not valid JSON" in text for text in second.texts("tool"))
        assert server.unscripted == []

    async def test_fenced_arguments_are_repaired_and_run(self) -> None:
        shell = Shell()
        script = Script().tool_call_raw("execute", '```json\n{"command": "pytest -q"}\n```').reply("done")

        answers, _ = await _run(script, shell)

        assert shell.calls == [("pytest -q", 3)]
        assert answers[0].status == "success"

    async def test_arguments_inside_prose_are_repaired(self) -> None:
        shell = Shell()
        script = Script().tool_call_raw("execute", 'Here you go: {"command": "ls"} hope it helps').reply("done")

        await _run(script, shell)

        assert shell.calls == [("ls", 3)]


class TestToolNames:
    async def test_a_namespaced_name_is_the_tool_it_names(self) -> None:
        shell = Shell()
        script = Script().tool_call("functions.execute", command="make").reply("done")

        answers, _ = await _run(script, shell)

        assert shell.calls == [("make", 3)]
        assert answers[0].name == "execute"

    async def test_surrounding_whitespace_is_dropped(self) -> None:
        shell = Shell()
        script = Script().tool_call(" execute\n", command="make").reply("done")

        await _run(script, shell)

        assert shell.calls == [("make", 3)]

    async def test_an_unknown_name_stays_unknown(self) -> None:
        shell = Shell()
        script = Script().tool_call("functions.deploy", command="make").reply("done")

        answers, _ = await _run(script, shell)

        assert shell.calls == []
        assert answers[0].status == "error"
        assert "functions.deploy" in answers[0].text


class TestArgumentValues:
    async def test_nul_characters_are_removed(self) -> None:
        shell = Shell()
        script = Script().tool_call("execute", command="echo\x00 hi").reply("done")

        await _run(script, shell)

        assert shell.calls == [("echo hi", 3)]

    async def test_null_for_an_optional_argument_means_its_default(self) -> None:
        shell = Shell()
        script = Script().tool_call("execute", command="make", retries=None).reply("done")

        answers, _ = await _run(script, shell)

        assert shell.calls == [("make", 3)]
        assert answers[0].status == "success"

    async def test_null_for_a_required_argument_is_still_an_error(self) -> None:
        shell = Shell()
        script = Script().tool_call("execute", command=None).reply("done")

        answers, _ = await _run(script, shell)

        assert shell.calls == []
        assert answers[0].status == "error"


class TestSecretsInOutboundTools:
    TOKEN = "xoxb-" + "1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx"

    async def test_an_outbound_tools_arguments_are_redacted_and_a_sandbox_tools_are_not(self) -> None:
        sent: list[str] = []
        ran: list[str] = []

        @tool
        async def slack_reply(text: str) -> str:
            """Reply in the Slack thread."""
            sent.append(text)
            return "sent"

        @tool
        async def execute(command: str) -> str:
            """Run a shell command."""
            ran.append(command)
            return "ok"

        script = (
            Script()
            .tool_call("execute", command=f"grep -r {self.TOKEN} .")
            .tool_call("slack_reply", text=f"The bot token is {self.TOKEN}, and here: `{self.TOKEN}`")
            .reply("done")
        )
        async with ScriptedModelServer(script) as server:
            agent = create_agent(
                chat_model(server), [slack_reply, execute], middleware=[SanitizeToolInputs(Redactor(), "t")]
            )
            await agent.ainvoke({"messages": [HumanMessage("reply")]})

        assert ran == [f"grep -r {self.TOKEN} ."]
        assert sent == ["The bot token is [redacted: Slack token], and here: `[redacted: Slack token]`"]


class TestRequiredArguments:
    def test_each_runs_new_tools_over_one_schema_are_read_once(self, monkeypatch: pytest.MonkeyPatch) -> None:
        class Command(BaseModel):
            command: str
            retries: int = 3

        async def run(command: str, retries: int = 3) -> str:
            return command

        read: list[str] = []
        original = sanitize._read_required

        def counting(tool: BaseTool) -> frozenset[str] | None:
            read.append(tool.name)
            return original(tool)

        monkeypatch.setattr(sanitize, "_read_required", counting)
        required = [
            # Each run builds its tools anew, over the same argument schema.
            sanitize._required(
                StructuredTool.from_function(coroutine=run, name=name, description="Run.", args_schema=Command)
            )
            for name in ("execute", "execute", "run")
        ]

        assert required == [frozenset({"command"})] * 3
        assert read == ["execute", "run"]
