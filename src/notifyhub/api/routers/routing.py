"""Who gets what: topics and rules (admin), events and relationships (publish)."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from notifyhub.api.deps import Admin, AppState, Publisher, Session, Unit
from notifyhub.api.openapi import NOT_FOUND, SERVICE
from notifyhub.api.params import RulePath, TenantQuery, TopicPath
from notifyhub.api.schemas.escalation import steps_of
from notifyhub.api.schemas.rules import (
    EventAccepted,
    EventIn,
    RelationshipIn,
    RenderedOut,
    RuleIn,
    RuleOut,
    RulePreviewIn,
    RulePreviewOut,
)
from notifyhub.api.schemas.topics import TopicMembersIn, TopicOut, TopicPatch
from notifyhub.domain.notification import extra_channels
from notifyhub.services.rules import (
    Event,
    RecipientSpec,
    RuleDefinition,
    preview,
    relationship_row,
)
from notifyhub.services.topics import TopicMembers

router = APIRouter(tags=["routing"], responses=SERVICE)


def _members(body: TopicMembersIn) -> TopicMembers:
    return TopicMembers(
        users=list(dict.fromkeys(body.users)), groups=list(dict.fromkeys(body.groups))
    )


@router.put(
    "/v1/admin/topics/{topic}",
    response_model=TopicOut,
    responses={201: {"model": TopicOut, "description": "Created"}},
)
async def replace_topic(
    topic: TopicPath,
    body: TopicMembersIn,
    principal: Admin,
    state: AppState,
    unit: Unit,
    response: Response,
    tenant: TenantQuery = "default",
) -> TopicOut:
    """Create (201) or replace (200) the topic's subscribers."""
    members = _members(body)
    created = await state["topics"].replace(unit, principal.own(tenant), topic, members)
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    return TopicOut(name=topic, tenant=tenant, users=members.users, groups=members.groups)


@router.patch("/v1/admin/topics/{topic}", response_model=TopicOut, responses=NOT_FOUND)
async def change_topic(
    topic: TopicPath,
    body: TopicPatch,
    principal: Admin,
    state: AppState,
    unit: Unit,
    tenant: TenantQuery = "default",
) -> TopicOut:
    """Subscribe and unsubscribe users and groups."""
    now = await state["topics"].change(
        unit, principal.own(tenant), topic, _members(body.add), _members(body.remove)
    )
    return TopicOut(name=topic, tenant=tenant, users=now.users, groups=now.groups)


@router.get("/v1/admin/topics/{topic}", response_model=TopicOut, responses=NOT_FOUND)
async def get_topic(
    topic: TopicPath,
    principal: Admin,
    state: AppState,
    session: Session,
    tenant: TenantQuery = "default",
) -> TopicOut:
    """The topic's subscribers."""
    members = await state["topics"].get(session, principal.own(tenant), topic)
    return TopicOut(name=topic, tenant=tenant, users=members.users, groups=members.groups)


@router.delete(
    "/v1/admin/topics/{topic}", status_code=status.HTTP_204_NO_CONTENT, responses=NOT_FOUND
)
async def delete_topic(
    topic: TopicPath, principal: Admin, state: AppState, unit: Unit, tenant: TenantQuery = "default"
) -> Response:
    """Delete the topic."""
    await state["topics"].delete(unit, principal.own(tenant), topic)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/v1/admin/rules/preview", response_model=RulePreviewOut)
async def preview_rule(body: RulePreviewIn, principal: Admin) -> RulePreviewOut:
    """Render a rule's templates against a sample event, as `POST /v1/events` would (the
    same sandbox and budget), storing and sending nothing: a template that does not
    compile is a 422 naming it, one that fails at render time has its `error`."""
    specs = [RecipientSpec.of(r) for r in body.rule.recipients]
    definition = RuleDefinition(body.name, body.rule.target_type, specs)
    sample = Event("", body.name, body.actor, body.target, body.data)
    return RulePreviewOut(
        recipients=[
            RenderedOut(
                relationship=r.relationship,
                obtain=r.obtain,
                title=r.title,
                body=r.body,
                error=r.error,
            )
            for r in preview(definition, sample)
        ]
    )


@router.put(
    "/v1/admin/rules/{rule}",
    response_model=RuleOut,
    responses={201: {"model": RuleOut, "description": "Created"}},
)
async def put_rule(
    rule: RulePath,
    body: RuleIn,
    principal: Admin,
    state: AppState,
    session: Session,
    response: Response,
    tenant: TenantQuery = "default",
) -> RuleOut:
    """Create (201) or replace (200) a rule (Design 3)."""
    specs = [RecipientSpec.of(r) for r in body.recipients]
    digest = body.digest.domain() if body.digest else None
    definition = RuleDefinition(
        rule,
        body.target_type,
        specs,
        extra_channels(body.channels),
        digest=digest,
        escalate=steps_of(body.escalate),
    )
    created = await state["rules"].put(session, principal.own(tenant), definition)
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    return RuleOut(
        name=rule,
        tenant=tenant,
        **body.model_dump(exclude={"channels"}),
        channels=definition.channels_json,
    )


@router.get("/v1/admin/rules/{rule}", response_model=RuleOut, responses=NOT_FOUND)
async def get_rule(
    rule: RulePath,
    principal: Admin,
    state: AppState,
    session: Session,
    tenant: TenantQuery = "default",
) -> RuleOut:
    """The rule."""
    found = await state["rules"].get(session, principal.own(tenant), rule)
    return RuleOut.of(found, tenant)


@router.delete(
    "/v1/admin/rules/{rule}", status_code=status.HTTP_204_NO_CONTENT, responses=NOT_FOUND
)
async def delete_rule(
    rule: RulePath,
    principal: Admin,
    state: AppState,
    session: Session,
    tenant: TenantQuery = "default",
) -> Response:
    """Delete the rule."""
    await state["rules"].delete(session, principal.own(tenant), rule)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/v1/events", status_code=status.HTTP_202_ACCEPTED, response_model=EventAccepted)
async def post_event(
    body: EventIn, principal: Publisher, state: AppState, session: Session
) -> EventAccepted:
    """Fire an event: the rule's template is rendered per relationship and delivered to
    the users subscribed to the target (an unknown rule is a 422)."""
    event = Event(principal.own(body.tenant), body.rule, body.actor, body.target, body.data)
    result = await state["rules"].fire(session, event)
    return EventAccepted(
        event_id=result.event_id,
        notifications=result.notifications,
        recipients=result.recipients,
        errors=result.errors,
    )


@router.post("/v1/relationships", status_code=status.HTTP_204_NO_CONTENT)
async def relate(
    body: RelationshipIn, principal: Publisher, state: AppState, session: Session
) -> Response:
    """Subscribe the user to every rule on the target's type with this relationship."""
    row = relationship_row(principal.own(body.tenant), body.user, body.relationship, body.target)
    await state["rules"].relate(session, row)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.delete("/v1/relationships", status_code=status.HTTP_204_NO_CONTENT, responses=NOT_FOUND)
async def unrelate(
    body: RelationshipIn, principal: Publisher, state: AppState, session: Session
) -> Response:
    """Remove the relationship (and the subscriptions it made)."""
    row = relationship_row(principal.own(body.tenant), body.user, body.relationship, body.target)
    await state["rules"].unrelate(session, row)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
