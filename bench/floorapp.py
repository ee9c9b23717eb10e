"""`python -m bench.floorapp`: the minimal floor for ingest, as the issue tracker defined it.

A bare FastAPI endpoint: a small pydantic model, one Redis script doing HSET + ZADD +
PUBLISH for one user, one uvicorn worker (the hub's uvicorn settings). No hub code at
all, unlike bench/bareapp.py, which runs the hub's own place script; this is what any
"store it and ring the bell" service costs on this stack.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator

import orjson
from fastapi import FastAPI, status
from pydantic import BaseModel, ConfigDict, Field
from redis.asyncio import Redis
from ulid import ULID

from bench.bareapp import serve

SCRIPT = """
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
redis.call('PUBLISH', KEYS[3], ARGV[4])
return 1
"""


class Recipients(BaseModel):
    model_config = ConfigDict(extra="forbid")
    users: list[str] = Field(min_length=1, max_length=1)


class Publish(BaseModel):
    model_config = ConfigDict(extra="forbid")
    recipients: Recipients
    title: str = Field(max_length=500)
    body: str = Field("", max_length=10_000)


class Accepted(BaseModel):
    id: str


def create_app(redis_url: str, prefix: str) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        redis = Redis.from_url(redis_url)
        app.state.store = redis.register_script(SCRIPT)
        yield
        await redis.aclose()

    app = FastAPI(lifespan=lifespan)

    @app.post("/v1/notifications", status_code=status.HTTP_202_ACCEPTED)
    async def publish(body: Publish) -> Accepted:
        user = body.recipients.users[0]
        nid = str(ULID())
        content = orjson.dumps({"id": nid, "title": body.title, "body": body.body})
        tag = f"{prefix}{{{user}}}"
        keys = [f"{tag}:items", f"{tag}:time", f"{prefix}bell"]
        await app.state.store(keys=keys, args=[nid, content, time.time_ns() // 1_000_000, user])
        return Accepted(id=nid)

    return app


def main() -> None:
    serve("python -m bench.floorapp", __doc__, create_app)


if __name__ == "__main__":
    main()
