"""The delayed queue's service driven as its routers drive it: one transaction per call."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from notifyhub.db.unit import UnitOfWork
from notifyhub.services.delayed import DelayedService, NewMessage, Status
from notifyhub.store.keys import Queue


class DelayedCalls:
    """`push`, `status`, `cancel`, `ack` and `restore`, each in a unit of work of its own
    (committed, then its after-commit work run), as a request would."""

    def __init__(
        self, service: DelayedService, sessionmaker: async_sessionmaker[AsyncSession]
    ) -> None:
        self.service = service
        self._sessionmaker = sessionmaker

    async def push(self, new: NewMessage) -> str:
        async with UnitOfWork(self._sessionmaker) as unit:
            message_id, _due_at = await self.service.push(unit, new)
        return message_id

    async def status(self, tenant: str, message_id: str) -> Status:
        async with self._sessionmaker() as session:
            return (await self.service.get(session, tenant, message_id)).status

    async def cancel(self, tenant: str, message_id: str) -> None:
        async with UnitOfWork(self._sessionmaker) as unit:
            await self.service.cancel(unit, tenant, message_id)

    async def ack(self, queue: Queue, message_id: str, receipt: str) -> None:
        async with UnitOfWork(self._sessionmaker) as unit:
            await self.service.ack(unit, queue, message_id, receipt)

    async def restore(self, *, expired: bool, tenant: str | None = None) -> int:
        async with self._sessionmaker.begin() as session:
            return await self.service.restore(session, expired=expired, tenant=tenant)
