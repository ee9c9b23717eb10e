"""Builder for Web Push: the installation's VAPID keys, users' push subscriptions and
addresses (the parts requests use; the `webpush` delivery kind sends through the outbox)."""

from __future__ import annotations

from dataclasses import dataclass, field

from notifyhub.db.unit import units
from notifyhub.features.clients import Database
from notifyhub.services.outbound import AddressGuard
from notifyhub.services.profiles import Profiles
from notifyhub.services.push_subscriptions import PushSubscriptions
from notifyhub.services.quiet_hours import QuietHours
from notifyhub.services.vapid import VapidKeys
from notifyhub.settings import Settings


@dataclass(frozen=True, slots=True)
class WebPush:
    vapid: VapidKeys
    subscriptions: PushSubscriptions
    profiles: Profiles
    quiet: QuietHours = field(default_factory=QuietHours)
    """Users' quiet hours (`outbox.rows` holds their e-mails and pushes)."""


def address_guard(settings: Settings) -> AddressGuard:
    """The SSRF guard of every outbound send (webhooks, push services), from settings."""
    return AddressGuard(
        settings.deliveries_allow_private_networks, settings.deliveries.allow_networks
    )


async def webpush(settings: Settings, database: Database) -> WebPush:
    """Read (or make, on the first start of an installation) the VAPID key pair now; a
    PostgreSQL outage postpones that to its first use."""
    vapid = VapidKeys(settings.webpush, units(database.sessionmaker))
    await vapid.warm()
    return WebPush(vapid, PushSubscriptions(address_guard(settings)), Profiles())
