"""The cost of usage accounting per model call and of the secret scan per posted message.

- accounting: :meth:`drydock.usage.UsageRecorder.record` on a reply with provider usage: reading
  the tokens, pricing them, the Prometheus counters and the Redis roll-ups (one pipeline to the
  embedded Valkey over loopback);
- budget check: :meth:`drydock.budgets.SpendCheck.reached` before a model call with a run limit,
  a user day budget and a repository day budget set (the run's and the day's roll-ups read in
  one pipeline);
- scan: :meth:`drydock.redaction.Redactor.redact` on a 1.5 KB pull-request body, once clean and
  once with a planted token, with the exact values of a configured installation's secrets.

Target: p50 < 1 ms each. Run: ``pdm run bench accounting``.
"""

from __future__ import annotations

import uuid

import structlog
from cryptography.fernet import Fernet
from langchain_core.messages import AIMessage

from bench.harness import measure, report
from drydock.budgets import Limits, SpendCheck
from drydock.config import load_settings
from drydock.embedded import embedded_infrastructure
from drydock.infra.redis import Keys, connect_redis
from drydock.model_catalog import PriceTable
from drydock.redaction import Redactor
from drydock.usage import UsageLedger, UsageRecorder, UsageScope

SAMPLES = 2000
BODY = (
    "## What changed\n\nFixed `add()` in `calc.py`: it subtracted. Added a regression test in "
    "`tests/test_calc.py` and ran the suite (`python3 -m unittest -q`: 42 tests, OK).\n\n"
    "## Notes\n\nThe flaky `test_timeout_retry` is unrelated; commit 3f9c2a1b7d4e5f60718293a4b5c6d7e8f9012345 "
    "introduced it. See https://github.com/acme/widgets/pull/7 and the CI run for details.\n\n"
) * 4
TOKEN = "ghp_" + "Pl4nt3dT0k3nAbCdEfGhIjKlMnOpQrStUv12"


def _reply() -> AIMessage:
    return AIMessage(
        content="",
        response_metadata={"model_name": "gpt-5.1-2025-11-13"},
        usage_metadata={
            "input_tokens": 24_000,
            "output_tokens": 900,
            "total_tokens": 24_900,
            "input_token_details": {"cache_read": 20_000},
            "output_token_details": {"reasoning": 600},
        },
    )


async def main() -> None:
    # A redaction is logged (its cost is measured); the lines themselves go nowhere.
    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())
    async with embedded_infrastructure() as urls:
        settings = load_settings(
            redis={"url": urls.redis},
            github={"webhook_secret": "bench-github-webhook-secret"},
            slack={"bot_token": "xoxb-bench-0000", "signing_secret": "bench-signing"},
            crypto={"keys": [Fernet.generate_key().decode()]},
        )
        redis = await connect_redis(settings.redis)
        try:
            keys = Keys(prefix=f"bench-{uuid.uuid4().hex[:8]}")
            scope = UsageScope(
                run_id=uuid.uuid4().hex,
                thread_id=str(uuid.uuid4()),
                role="coder",
                user_id="ada",
                repository="acme/widgets",
            )
            recorder = UsageRecorder(UsageLedger(redis, keys), PriceTable.from_settings(settings), scope)

            async def account() -> None:
                await recorder.record(_reply(), "gpt-5.1")

            report(await measure("accounting per model call", account, count=SAMPLES), target_p50_ms=1.0)

            limits = Limits(run_usd=1_000.0, user_day_usd=10_000.0, repository_day_usd=10_000.0)
            spend = SpendCheck(
                UsageLedger(redis, keys), limits, run_id=scope.run_id, user_id="ada", repository="acme/widgets"
            )

            async def check() -> None:
                if await spend.reached() is not None:
                    raise RuntimeError("the bench's limits are far above its spend")

            report(await measure("budget check per model call (3 limits)", check, count=SAMPLES), target_p50_ms=1.0)

            redactor = Redactor.from_settings(settings).with_values({"grant-" + uuid.uuid4().hex: "sandbox grant"})
            leaky = BODY + f"\nremote: https://x-access-token:{TOKEN}@github.com/acme/widgets.git\n"

            async def scan_clean() -> None:
                redactor.redact(BODY, where="bench")

            async def scan_leaky() -> None:
                redactor.redact(leaky, where="bench")

            report(
                await measure(f"scan per message ({len(BODY)} chars, clean)", scan_clean, count=SAMPLES),
                target_p50_ms=1.0,
            )
            report(await measure("scan per message (one planted token)", scan_leaky, count=SAMPLES), target_p50_ms=1.0)
        finally:
            await redis.aclose()
