"""Receivers for the delivery-target rows, each in its own process (so the bench's own
sends do not share its event loop): prints `ready`, then `<id> <CLOCK_MONOTONIC>` per
message as it arrives (one clock for every process of the machine).

    python -m bench.sinks smtp PORT            an aiosmtpd server; id from Message-ID
    python -m bench.sinks amqp URL QUEUE       a consumer of QUEUE; id = message_id
    python -m bench.sinks push PORT            a push service: POST /push/<sid> answers 201
                                               (body not decrypted); id from `Topic`
"""

from __future__ import annotations

import asyncio
import re
import sys
import time
from typing import Any

import aio_pika
import uvloop
from aio_pika.abc import AbstractIncomingMessage
from aiosmtpd.smtp import SMTP

MESSAGE_ID = re.compile(rb"^Message-ID: <([^@>]+)@", re.MULTILINE | re.IGNORECASE)


def _arrived(item_id: str) -> None:
    sys.stdout.write(f"{item_id} {time.monotonic()}\n")
    sys.stdout.flush()


class _Mailbox:
    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        found = MESSAGE_ID.search(envelope.content)
        _arrived(found.group(1).decode() if found else "?")
        return "250 OK"


async def smtp(port: int) -> None:
    mailbox = _Mailbox()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: SMTP(mailbox, hostname="bench-sink"), "127.0.0.1", port
    )
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


async def amqp(url: str, queue_name: str) -> None:
    connection = await aio_pika.connect(url)
    async with connection:
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=1000)
        queue = await channel.get_queue(queue_name)

        async def take(message: AbstractIncomingMessage) -> None:
            _arrived(message.message_id or "?")

        await queue.consume(take, no_ack=True)
        print("ready", flush=True)
        await asyncio.Future()


async def _push_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    """One HTTP/1.1 request of a kept connection read and answered 201 (False at EOF)."""
    if not await reader.readline():
        return False
    length, topic = 0, "?"
    while (raw := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = raw.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"topic":
            topic = value.strip().decode()
    await reader.readexactly(length)
    _arrived(topic)
    writer.write(b"HTTP/1.1 201 Created\r\nLocation: /message/1\r\nContent-Length: 0\r\n\r\n")
    await writer.drain()
    return True


async def push(port: int) -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await _push_request(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", port)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    kind, *args = sys.argv[1:]
    if kind == "smtp":
        uvloop.run(smtp(int(args[0])))
    elif kind == "push":
        uvloop.run(push(int(args[0])))
    else:
        uvloop.run(amqp(args[0], args[1]))


if __name__ == "__main__":
    main()
