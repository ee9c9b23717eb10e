"""What a fault scenario gets: the killable processes, credentials, and the run's report."""

from __future__ import annotations

from dataclasses import dataclass

from notifyhub.services.tokens import TokenService
from notifyhub.settings import Settings
from support.history import Verdict
from support.processes import HubProcess, PostgresProcess, RedisProcess

REPORT: list[Verdict] = []
"""Every scenario's verdicts, printed (and optionally written to docs) at the end."""


@dataclass
class FaultEnv:
    redis: RedisProcess
    postgres: PostgresProcess
    hub: HubProcess
    settings: Settings
    publish_key: str
    consume_key: str

    def user_token(self, user: str) -> str:
        return TokenService(self.settings).mint_user_token(user, "default", 3600)

    @property
    def pubsub_client_name(self) -> str:
        return f"notifyhub-pubsub-{self.settings.redis_prefix}events"
