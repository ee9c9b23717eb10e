"""`python -m bench.bareapp`: the stack's ceiling, a bare FastAPI app with the hub's hot path only.

One POST endpoint parses the hub's own `PublishRequest`, builds the stored content like
the hub does and runs one EVALSHA of the hub's place script (common.lua + place.lua)
for the first user: no authentication, no idempotency, no fan-out resolution, no
doorbell. uvicorn runs with the hub's settings (one worker, httptools, uvloop).
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from importlib.resources import files

import orjson
import uvicorn
from fastapi import FastAPI, status
from redis.asyncio import Redis
from ulid import ULID

from notifyhub.api.schemas.notifications import PublishAccepted, PublishRequest
from notifyhub.domain.notification import Notification
from notifyhub.settings import Limits
from notifyhub.store.codecs import CopyArgs
from notifyhub.store.keys import Keys

LIMITS = Limits()
TTL = timedelta(days=30)
_STORED = set(PublishRequest.model_fields) & set(Notification.model_fields) - {"expires_at"}
"""What a request hands on to the stored content as it is (what it says of delivery,
channels, digests and escalation the stored notification does not carry)."""


def _script_source() -> str:
    lua = files("notifyhub.store") / "lua"
    return (lua / "common.lua").read_text() + "\n" + (lua / "place.lua").read_text()


def create_app(redis_url: str, prefix: str) -> FastAPI:
    keys = Keys(prefix)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        redis = Redis.from_url(redis_url)
        app.state.place = redis.register_script(_script_source())
        yield
        await redis.aclose()

    app = FastAPI(lifespan=lifespan)

    @app.post(
        "/v1/notifications", status_code=status.HTTP_202_ACCEPTED, response_model=PublishAccepted
    )
    async def publish(body: PublishRequest) -> PublishAccepted:
        now = datetime.now(UTC)
        fields = body.model_dump(include=_STORED)
        notification = Notification(id=str(ULID()), created_at=now, expires_at=now + TTL, **fields)
        content = orjson.dumps(notification.model_dump(mode="json"))
        expires_ms = int(notification.expires_at.timestamp() * 1000)
        user = body.recipients.users[0]
        # place.lua's ARGV, as store/inbox/placing.py Placing.place passes them (the layout
        # changed with views and threads: built by the same codec, it cannot drift again)
        copy = CopyArgs(
            id=notification.id,
            content=content,
            category="",
            collapse_key="",
            expires_ms=expires_ms,
            log_max=LIMITS.change_log_max,
            critical=False,
            pull=False,
            items_per_user=LIMITS.items_per_user,
        )
        await app.state.place(keys=keys.inbox_list(body.tenant, user), args=copy.place_args())
        return PublishAccepted(id=notification.id, recipients=1)

    return app


def serve(prog: str, description: str | None, create: Callable[[str, str], FastAPI]) -> None:
    """Run `create(redis_url, prefix)` on `--port` in uvicorn, as the hub runs (one
    worker; uvicorn picks httptools and uvloop when installed, as for the hub)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = create(os.environ["BENCH_BARE_REDIS_URL"], os.environ["BENCH_BARE_PREFIX"])
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=args.port,
        lifespan="on",
        proxy_headers=True,
        access_log=False,
        log_level="warning",
    )
    uvicorn.Server(config).run()


def main() -> None:
    serve("python -m bench.bareapp", __doc__, create_app)


if __name__ == "__main__":
    main()
