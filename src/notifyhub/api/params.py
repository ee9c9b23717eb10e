"""Path and query parameters the routers share, each with its description and example
(an explicit example, so Swagger never derives one from a pattern)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from notifyhub.api.schemas.common import ULID_EXAMPLE, Name, NotificationId, Tenant

TenantQuery = Annotated[
    Tenant,
    Query(
        description="The tenant acted on (`default` when omitted); a key bound to another "
        "tenant gets 403.",
        examples=["default"],
    ),
]
GroupPath = Annotated[
    Name, Path(description="The group's name within the tenant.", examples=["replenishers"])
]
TopicPath = Annotated[
    Name, Path(description="The topic's name within the tenant.", examples=["restock"])
]
RulePath = Annotated[
    Name,
    Path(description="The rule's name within the tenant.", examples=["comment_created_post"]),
]
DefinitionPath = Annotated[
    Name, Path(description="The delivery definition's name.", examples=["erp-orders"])
]
QueuePath = Annotated[
    Name, Path(description="The queue's name within the tenant.", examples=["order-timeouts"])
]
DeprecatedTopicPath = Annotated[
    Name,
    Path(description="The queue's name (its deprecated name: topic).", examples=["order-timeouts"]),
]
MessageIdPath = Annotated[
    NotificationId, Path(description="The delayed message's id (a ULID).", examples=[ULID_EXAMPLE])
]
DeliveryIdPath = Annotated[
    NotificationId, Path(description="The delivery's id (a ULID).", examples=[ULID_EXAMPLE])
]
NotificationIdPath = Annotated[
    NotificationId, Path(description="The notification's id (a ULID).", examples=[ULID_EXAMPLE])
]
ActionIdPath = Annotated[
    str,
    Path(
        min_length=1,
        max_length=32,
        pattern=r"^[a-z0-9][a-z0-9_-]*$",
        description="One of the notification's actions, by its `id`.",
        examples=["approve"],
    ),
]
