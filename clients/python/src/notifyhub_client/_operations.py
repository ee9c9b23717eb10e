"""Every API operation, defined once for both clients.

An operation is a method that builds a `Call` (what to send, how to read the answer);
the `operation` decorator turns it into a descriptor that, on a `Client`, performs the
call and returns its result, and on an `AsyncClient` returns an awaitable of it. The
signatures below are the clients' public API (type checkers see them through the
descriptor's overloads).
"""

from __future__ import annotations

import functools
import inspect
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Concatenate, Generic, Literal, ParamSpec, TypeVar, overload

import httpx
import pydantic
from pydantic import JsonValue

from notifyhub_client import models as m
from notifyhub_client._http import Call, model, model_list, nothing, segment
from notifyhub_client.errors import InvalidArgument

if TYPE_CHECKING:
    from notifyhub_client.aio import AsyncClient
    from notifyhub_client.client import Client

P = ParamSpec("P")
T = TypeVar("T")
M = TypeVar("M", bound=pydantic.BaseModel)

QUEUE_MESSAGES_PATH = "/v1/queues/{queue}/messages"
"""A delayed queue's consume path; its ack is `{this}/{id}/ack` (the one place naming it;
the hub's deprecated `/v1/topics/...` spelling is not used)."""
IDEMPOTENCY_KEY = "Idempotency-Key"

RefLike = m.Ref | Mapping[str, str]
ActorLike = m.Actor | m.Ref | Mapping[str, str]


class Operation(Generic[P, T]):
    """A method building a `Call[T]`, bound to a client as a method returning `T`
    (`Client`) or `Awaitable[T]` (`AsyncClient`)."""

    def __init__(self, build: Callable[Concatenate[Any, P], Call[T]]) -> None:
        self.build = build
        self.__doc__ = build.__doc__
        signature = inspect.signature(build)
        self.signature = signature.replace(  # without `self`, and the result not a Call
            parameters=list(signature.parameters.values())[1:],
            return_annotation=inspect.Signature.empty,
        )

    @overload
    def __get__(self, instance: None, owner: type[Any]) -> Operation[P, T]: ...
    @overload
    def __get__(self, instance: Client, owner: type[Any]) -> Callable[P, T]: ...
    @overload
    def __get__(self, instance: AsyncClient, owner: type[Any]) -> Callable[P, Awaitable[T]]: ...
    def __get__(self, instance: Any, owner: type[Any]) -> Any:
        if instance is None:
            return self
        build, run = self.build, instance._run

        @functools.wraps(build)
        def bound(*args: P.args, **kwargs: P.kwargs) -> Any:
            try:
                call = build(instance, *args, **kwargs)
            except pydantic.ValidationError as error:  # the caller's argument, not the hub
                raise InvalidArgument.of(error) from error
            return run(call)

        bound.__signature__ = self.signature  # type: ignore[attr-defined]
        return bound


def operation(build: Callable[Concatenate[Any, P], Call[T]]) -> Operation[P, T]:
    return Operation(build)


def _names(field: str, values: Sequence[T]) -> list[T]:
    """A list parameter's items; a bare `str` (a `Sequence[str]` to type checkers too) is
    refused rather than sent as its letters (`users="alice"`: users a, l, i, c, e)."""
    if isinstance(values, str):
        raise TypeError(f"{field}: give a list of names, not the string {values!r}")
    return list(values)


def _part(cls: type[M], value: Mapping[str, str], argument: str) -> M:
    """A mapping argument as its model; refused naming the argument (`actor.nmae`)."""
    try:
        return cls.model_validate(value)
    except pydantic.ValidationError as error:
        raise InvalidArgument.of(error, argument) from error


def _ref(value: RefLike | None) -> m.Ref | None:
    return None if value is None else _required_ref(value)


def _required_ref(value: RefLike) -> m.Ref:
    return value if isinstance(value, m.Ref) else _part(m.Ref, value, "target")


def _actor(value: ActorLike | None) -> m.Actor | None:
    return None if value is None else _required_actor(value)


def _required_actor(value: ActorLike) -> m.Actor:
    if isinstance(value, m.Actor):
        return value
    if isinstance(value, m.Ref):
        return m.Actor(type=value.type, id=value.id)
    return _part(m.Actor, value, "actor")


def _updated(response: httpx.Response) -> int:
    return m.Updated.model_validate_json(response.content).updated


def _every(token: str, action: str, request: m.ReadAllRequest) -> Call[int]:
    """`POST /v1/me/notifications/<action>` (read-all, archive-all) with the user's JWT:
    how many changed."""
    path = f"/v1/me/notifications/{action}"
    headers = {"Authorization": f"Bearer {token}"}
    return Call("POST", path, _updated, json=request.to_json(), headers=headers)


class Operations:
    """The API, shared by `Client` and `AsyncClient`. `tenant` defaults to the client's."""

    tenant: str

    def _tenant(self, tenant: str | None) -> dict[str, str]:
        return {"tenant": tenant or self.tenant}

    # --- Publish ---------------------------------------------------------------------

    @operation
    def notify(
        self,
        title: str,
        *,
        users: Sequence[str] = (),
        groups: Sequence[str] = (),
        topics: Sequence[str] = (),
        tenant: str | None = None,
        body: str | None = None,
        body_format: Literal["text", "markdown"] | None = None,
        severity: m.Severity | None = None,
        category: str | None = None,
        source: str | None = None,
        display: m.Display | None = None,
        data: Mapping[str, JsonValue] | None = None,
        action_url: str | None = None,
        actor: ActorLike | None = None,
        target: RefLike | None = None,
        ttl: int | None = None,
        expires_at: datetime | None = None,
        collapse_key: str | None = None,
        tags: Sequence[str] = (),
        thread_key: str | None = None,
        thread_window_s: int | None = None,
        actions: Sequence[m.Action] = (),
        channels: Sequence[m.Channel] = (),
        deliver_at: datetime | None = None,
        delay: int | None = None,
        idempotency_key: str | None = None,
    ) -> Call[m.Accepted]:
        """Publish a notification to users, groups and topics (`POST /v1/notifications`).

        Sent with an `Idempotency-Key` (a fresh one per call unless given), the same on
        every retry: a retried publish that the hub had already accepted answers the
        first response and reaches nobody twice."""
        request = m.PublishRequest(
            tenant=tenant or self.tenant,
            recipients=m.Recipients(
                users=_names("users", users),
                groups=_names("groups", groups),
                topics=_names("topics", topics),
            ),
            title=title,
            body=body,
            body_format=body_format,
            severity=severity,
            category=category,
            source=source,
            display=display,
            data=dict(data) if data is not None else None,
            action_url=action_url,
            actor=_actor(actor),
            target=_ref(target),
            ttl=ttl,
            expires_at=expires_at,
            collapse_key=collapse_key,
            tags=_names("tags", tags) or None,
            thread_key=thread_key,
            thread_window_s=thread_window_s,
            actions=list(actions) or None,
            channels=_names("channels", channels) or None,
            deliver_at=deliver_at,
            delay=delay,
        )
        key = idempotency_key or str(uuid.uuid4())
        return Call(
            "POST",
            "/v1/notifications",
            model(m.Accepted),
            json=request.to_json(),
            headers={IDEMPOTENCY_KEY: key},
        )

    @operation
    def recall(self, notification_id: str, *, tenant: str | None = None) -> Call[None]:
        """Cancel a scheduled notification, or remove it from every inbox (204)."""
        path = f"/v1/notifications/{segment(notification_id)}"
        return Call("DELETE", path, nothing, params=self._tenant(tenant))

    @operation
    def send_event(
        self,
        rule: str,
        *,
        actor: ActorLike,
        target: RefLike,
        data: Mapping[str, JsonValue] | None = None,
        tenant: str | None = None,
    ) -> Call[m.EventAccepted]:
        """Fire `rule` for `target`: notifies the users related to it (`POST /v1/events`).
        Not repeated after the hub may have acted on it (it has no idempotency key)."""
        request = m.EventRequest(
            tenant=tenant or self.tenant,
            rule=rule,
            actor=_required_actor(actor),
            target=_required_ref(target),
            data=dict(data) if data is not None else None,
        )
        return Call(
            "POST", "/v1/events", model(m.EventAccepted), json=request.to_json(), idempotent=False
        )

    @operation
    def relate(
        self, user: str, relationship: str, target: RefLike, *, tenant: str | None = None
    ) -> Call[None]:
        """Subscribe `user` to every rule on `target`'s type with this relationship."""
        return self._relationship("POST", user, relationship, target, tenant)

    @operation
    def unrelate(
        self, user: str, relationship: str, target: RefLike, *, tenant: str | None = None
    ) -> Call[None]:
        """Undo `relate`."""
        return self._relationship("DELETE", user, relationship, target, tenant)

    def _relationship(
        self, method: str, user: str, relationship: str, target: RefLike, tenant: str | None
    ) -> Call[None]:
        request = m.RelationshipRequest(
            tenant=tenant or self.tenant,
            user=user,
            relationship=relationship,
            target=_required_ref(target),
        )
        return Call(method, "/v1/relationships", nothing, json=request.to_json())

    # --- A user's inbox (the user's token) -------------------------------------------

    @operation
    def read_all(
        self,
        token: str,
        *,
        category: str | None = None,
        before: datetime | None = None,
        view: str | None = None,
    ) -> Call[int]:
        """Mark the user's unread notifications read (`POST /v1/me/notifications/read-all`
        with the user's JWT as `token`); returns how many. `category`, `before` (an aware
        datetime) and `view` (one of the user's views: only what its list shows; one they
        do not have is the hub's 422) narrow it, all of them holding."""
        request = m.ReadAllRequest(category=category, before=before, view=view)
        return _every(token, "read-all", request)

    @operation
    def archive_all(
        self,
        token: str,
        *,
        category: str | None = None,
        before: datetime | None = None,
        view: str | None = None,
    ) -> Call[int]:
        """Archive the user's notifications (`POST /v1/me/notifications/archive-all` with
        the user's JWT as `token`); returns how many. Narrowed as `read_all` is."""
        request = m.ReadAllRequest(category=category, before=before, view=view)
        return _every(token, "archive-all", request)

    # --- Delayed queue ---------------------------------------------------------------

    @operation
    def push_delayed(
        self,
        queue: str,
        body: JsonValue,
        *,
        delay_ms: int | None = None,
        due_at: datetime | None = None,
        priority: int | None = None,
        ttl_ms: int | None = None,
        biz_key: str | None = None,
        tenant: str | None = None,
    ) -> Call[m.DelayedAccepted]:
        """Queue `body` on `queue`, due after `delay_ms` or at
        `due_at` (give one). Not repeated after the hub may have acted on it."""
        request = m.DelayedRequest(
            tenant=tenant or self.tenant,
            queue=queue,
            body=body,
            delay_ms=delay_ms,
            due_at=due_at,
            priority=priority,
            ttl_ms=ttl_ms,
            biz_key=biz_key,
        )
        return Call(
            "POST",
            "/v1/delayed",
            model(m.DelayedAccepted),
            json=request.to_json(),
            idempotent=False,
        )

    @operation
    def get_delayed(self, message_id: str, *, tenant: str | None = None) -> Call[m.DelayedMessage]:
        path = f"/v1/delayed/{segment(message_id)}"
        return Call("GET", path, model(m.DelayedMessage), params=self._tenant(tenant))

    @operation
    def cancel_delayed(self, message_id: str, *, tenant: str | None = None) -> Call[None]:
        """Cancel a message not yet taken (`Conflict` once reserved or consumed)."""
        path = f"/v1/delayed/{segment(message_id)}"
        return Call("DELETE", path, nothing, params=self._tenant(tenant))

    @operation
    def poll_queue(
        self, queue: str, *, wait: int = 0, max: int = 10, tenant: str | None = None
    ) -> Call[list[m.QueueMessage]]:
        """Take up to `max` ready messages, waiting up to `wait` seconds (0..60) for one.
        Each must be acked within its `ttl_ms`, else it is offered again."""
        path = QUEUE_MESSAGES_PATH.format(queue=segment(queue))
        params: dict[str, str | int] = {"wait": wait, "max": max, **self._tenant(tenant)}
        return Call(
            "GET",
            path,
            model_list(m.QueueMessage, "messages"),
            params=params,
            timeout=wait + 30.0,  # retried too: a lost answer's messages return after ttl_ms
        )

    @operation
    def ack_message(
        self, queue: str, message_id: str, receipt: str, *, tenant: str | None = None
    ) -> Call[None]:
        """Mark a taken message consumed (`Conflict` when its receipt went stale)."""
        path = QUEUE_MESSAGES_PATH.format(queue=segment(queue)) + f"/{segment(message_id)}/ack"
        return Call(
            "POST",
            path,
            nothing,
            params=self._tenant(tenant),
            json=m.AckRequest(receipt=receipt).to_json(),
            idempotent=False,  # a repeat of an ack that landed is a Conflict
        )

    # --- Deliveries ------------------------------------------------------------------

    @operation
    def create_delivery(
        self,
        definition: str,
        payload: Mapping[str, JsonValue],
        *,
        description: str | None = None,
        tenant: str | None = None,
    ) -> Call[m.DeliveryAccepted]:
        """Send `payload` to `definition`'s URL, signed, retried by the hub until it is
        taken (202 once durable). Not repeated after the hub may have acted on it."""
        request = m.DeliveryRequest(
            tenant=tenant or self.tenant,
            definition=definition,
            payload=dict(payload),
            description=description,
        )
        return Call(
            "POST",
            "/v1/deliveries",
            model(m.DeliveryAccepted),
            json=request.to_json(),
            idempotent=False,
        )

    @operation
    def get_delivery(self, delivery_id: str, *, tenant: str | None = None) -> Call[m.Delivery]:
        path = f"/v1/deliveries/{segment(delivery_id)}"
        return Call("GET", path, model(m.Delivery), params=self._tenant(tenant))

    @operation
    def confirm_delivery(self, delivery_id: str, *, tenant: str | None = None) -> Call[m.Delivery]:
        """Confirm a delivery `awaiting_confirm` (its definition has `need_confirm`)."""
        path = f"/v1/deliveries/{segment(delivery_id)}/confirm"
        return Call("POST", path, model(m.Delivery), params=self._tenant(tenant))

    # --- Admin (admin key) -----------------------------------------------------------

    @operation
    def put_group(self, name: str, *, tenant: str | None = None) -> Call[m.Group]:
        """Create a group (roles are groups); an existing one is left as it is."""
        path = f"/v1/admin/groups/{segment(name)}"
        return Call("PUT", path, model(m.Group), params=self._tenant(tenant))

    @operation
    def change_group_members(
        self,
        name: str,
        *,
        add: Sequence[str] = (),
        remove: Sequence[str] = (),
        tenant: str | None = None,
    ) -> Call[m.Group]:
        path = f"/v1/admin/groups/{segment(name)}/members"
        request = m.MembersChange(add=_names("add", add), remove=_names("remove", remove))
        return Call(
            "POST", path, model(m.Group), params=self._tenant(tenant), json=request.to_json()
        )

    @operation
    def put_topic(
        self,
        name: str,
        *,
        users: Sequence[str] = (),
        groups: Sequence[str] = (),
        tenant: str | None = None,
    ) -> Call[m.Topic]:
        """Create or replace a topic's subscribers."""
        path = f"/v1/admin/topics/{segment(name)}"
        request = m.TopicMembers(users=_names("users", users), groups=_names("groups", groups))
        return Call(
            "PUT", path, model(m.Topic), params=self._tenant(tenant), json=request.to_json()
        )

    @operation
    def put_rule(
        self,
        name: str,
        *,
        target_type: str,
        recipients: Sequence[m.RuleRecipient],
        channels: Sequence[m.Channel] = (),
        tenant: str | None = None,
    ) -> Call[m.Rule]:
        """Create or replace a rule: per relationship, a template and push or pull; its
        notifications reach `channels` beyond the inbox (`email`, `push`)."""
        path = f"/v1/admin/rules/{segment(name)}"
        request = m.RuleRequest(
            target_type=target_type,
            recipients=list(recipients),
            channels=_names("channels", channels) or None,
        )
        return Call("PUT", path, model(m.Rule), params=self._tenant(tenant), json=request.to_json())

    @operation
    def put_delivery_definition(
        self,
        name: str,
        *,
        url: str | None = None,
        email: m.EmailTarget | None = None,
        rabbitmq: m.RabbitTarget | None = None,
        timeout_s: float | None = None,
        retry_intervals: str | None = None,
        max_retries: int | None = None,
        alert: m.Alert | None = None,
        need_confirm: bool | None = None,
        max_confirm_delay_s: int | None = None,
        rotate_secret: bool | None = None,
        drop_previous_secret: bool | None = None,
        tenant: str | None = None,
    ) -> Call[m.DeliveryDefinition]:
        """Create or replace where a kind of delivery goes: a webhook `url`, an `email`
        or a `rabbitmq` target (exactly one); the answer's `secret` is set on creation
        and rotation only. A rotation is not repeated after the hub may have acted on it."""
        path = f"/v1/admin/delivery-definitions/{segment(name)}"
        kind = "email" if email else "rabbitmq" if rabbitmq else None
        request = m.DefinitionRequest(
            tenant=tenant or self.tenant,
            kind=kind,
            url=url,
            email=email,
            rabbitmq=rabbitmq,
            timeout_s=timeout_s,
            retry_intervals=retry_intervals,
            max_retries=max_retries,
            alert=alert,
            need_confirm=need_confirm,
            max_confirm_delay_s=max_confirm_delay_s,
            rotate_secret=rotate_secret,
            drop_previous_secret=drop_previous_secret,
        )
        return Call(
            "PUT",
            path,
            model(m.DeliveryDefinition),
            json=request.to_json(),
            # A repeated rotation rotates again, dropping the secret receivers still use.
            idempotent=not rotate_secret,
        )
