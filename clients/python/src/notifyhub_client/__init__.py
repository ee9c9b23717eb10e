"""notifyhub-client: the Python client for notifyhub services.

    from notifyhub_client import Client

    with Client("https://hub.example", api_key) as hub:
        accepted = hub.notify("Restock A-12", users=["alice"], severity="warning")

`AsyncClient` has the same operations, awaited. See `Client` for retries and
idempotency, `notifyhub_client.errors` for the exceptions.
"""

from notifyhub_client._config import VERSION
from notifyhub_client._http import NO_RETRIES, RetryPolicy
from notifyhub_client._operations import QUEUE_MESSAGES_PATH
from notifyhub_client._stream import (
    CountsEvent,
    DeleteEvent,
    NotificationEvent,
    ReconnectPolicy,
    ResetEvent,
    StreamEvent,
    StreamProtocolError,
    UpdateEvent,
)
from notifyhub_client.aio import AsyncClient, AsyncEventStream, AsyncMessage, AsyncQueue
from notifyhub_client.client import Client, EventStream, Message, Queue
from notifyhub_client.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    HubUnreachable,
    InvalidArgument,
    NotFound,
    NotifyhubError,
    RateLimited,
    ServerError,
    Unauthorized,
    Unavailable,
    UnexpectedAnswer,
    ValidationError,
)
from notifyhub_client.models import (
    Accepted,
    Action,
    Actor,
    Alert,
    Completed,
    Counts,
    DelayedAccepted,
    DelayedMessage,
    Delivery,
    DeliveryAccepted,
    DeliveryDefinition,
    EmailTarget,
    EventAccepted,
    Group,
    Notification,
    QueueMessage,
    RabbitTarget,
    Ref,
    Rule,
    RuleRecipient,
    Thread,
    Topic,
    ViewCount,
)

__version__ = VERSION

__all__ = [
    "NO_RETRIES",
    "QUEUE_MESSAGES_PATH",
    "Accepted",
    "Action",
    "Actor",
    "Alert",
    "AsyncClient",
    "AsyncEventStream",
    "AsyncMessage",
    "AsyncQueue",
    "BadRequest",
    "Client",
    "Completed",
    "Conflict",
    "Counts",
    "CountsEvent",
    "DelayedAccepted",
    "DelayedMessage",
    "DeleteEvent",
    "Delivery",
    "DeliveryAccepted",
    "DeliveryDefinition",
    "EmailTarget",
    "EventAccepted",
    "EventStream",
    "Forbidden",
    "Group",
    "HubUnreachable",
    "InvalidArgument",
    "Message",
    "NotFound",
    "Notification",
    "NotificationEvent",
    "NotifyhubError",
    "Queue",
    "QueueMessage",
    "RabbitTarget",
    "RateLimited",
    "ReconnectPolicy",
    "Ref",
    "ResetEvent",
    "RetryPolicy",
    "Rule",
    "RuleRecipient",
    "ServerError",
    "StreamEvent",
    "StreamProtocolError",
    "Thread",
    "Topic",
    "Unauthorized",
    "Unavailable",
    "UnexpectedAnswer",
    "UpdateEvent",
    "ValidationError",
    "ViewCount",
    "__version__",
]
