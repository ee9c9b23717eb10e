"""Admin API: a user's open digests (issue 41 item 4), and cancelling one (audited by the
`Admin` dependency, as every admin change)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, status

from notifyhub.api.deps import Admin, Unit
from notifyhub.api.openapi import NOT_FOUND, SERVICE
from notifyhub.api.routers.admin_users import TenantPath, UserPath
from notifyhub.api.schemas.digests import DigestIn, DigestOut, UserDigests
from notifyhub.db.models import Digest
from notifyhub.services import digests

router = APIRouter(prefix="/v1/admin", tags=["admin"], responses=SERVICE)

DigestPath = Annotated[
    str,
    Path(
        min_length=26,
        max_length=26,
        pattern=r"^[0-9A-HJKMNP-TV-Z]{26}$",
        description="The digest's id, as the user's digests list it.",
        examples=["01KJPWG8904B3YTENFP0G2XFWR"],
    ),
]


def _out(row: Digest) -> DigestOut:
    return DigestOut(
        id=row.id,
        key=row.key,
        state=row.state,  # pending_of: open or full only
        items=row.item_count,
        first_sent=row.first_sent,
        opened_at=row.opened_at,
        due_at=row.due_at,
        spec=DigestIn.of(row.spec),
    )


# Declared before admin_users' `GET /users/{tenant}/{user:path}`, which would take
# `alice/digests` for a user id (app.py includes this router first).
@router.get("/users/{tenant}/{user:path}/digests", response_model=UserDigests)
async def user_digests(
    tenant: TenantPath, user: UserPath, principal: Admin, unit: Unit
) -> UserDigests:
    """The user's digests not sent yet: their key, items so far and when they are sent
    (`due_at`). A key bound to another tenant gets 403."""
    rows = await digests.pending(unit, principal.own(tenant), user)
    return UserDigests(tenant=tenant, user=user, digests=[_out(row) for row in rows])


@router.delete(
    "/users/{tenant}/{user:path}/digests/{digest_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=NOT_FOUND,
)
async def cancel_digest(
    tenant: TenantPath, user: UserPath, digest_id: DigestPath, principal: Admin, unit: Unit
) -> None:
    """Cancel one of the user's open digests: its items are never e-mailed or pushed (the
    inbox copies stay). Audited. 404 when it was sent or cancelled already, or is not this
    user's."""
    await digests.cancel(unit, principal.own(tenant), user, digest_id, principal.name)
