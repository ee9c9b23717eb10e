"""Failure alerts: e-mail over SMTP and/or an alert webhook, one per owed alert row.

Alert rows are written in the same transaction as the settlement that owes them, so an
alert is never owed twice; they are claimed with a lease and marked sent `WHERE claims =
<the claim>`, so a normal run sends each exactly once (a crash between the send and the
mark re-sends it after the lease: at-least-once, like everything we promise).
"""

from __future__ import annotations

import logging
import time
from email.message import EmailMessage

import aiosmtplib
import orjson

from notifyhub.db.models import DeliveryDefinition
from notifyhub.db.repositories import deliveries as repo
from notifyhub.db.repositories import delivery_alerts
from notifyhub.db.repositories.delivery_alerts import ClaimedAlert
from notifyhub.db.unit import Units
from notifyhub.delivery_metrics import DeliveryMetrics
from notifyhub.services import signing
from notifyhub.services.email_target import smtp_options
from notifyhub.services.outbound import Outbound
from notifyhub.settings import DeliverySettings

log = logging.getLogger(__name__)

ALERT_BATCH = 50


def _text(alert: ClaimedAlert) -> tuple[str, str]:
    kind = "finally failed" if alert.final else "failed"
    subject = f"[notifyhub] delivery {alert.delivery_id} ({alert.tenant}/{alert.definition}) {kind}"
    body = (
        f"Delivery {alert.delivery_id} of definition {alert.definition!r} "
        f"of tenant {alert.tenant!r} {kind} "
        f"on attempt {alert.number} ({alert.failures} failures so far).\n\n"
        f"Last error: {alert.error or 'unknown'}\n"
    )
    return subject, body


class AlertSender:
    """Sends the alerts the outbox owes (called from the dispatcher's loop). A claim and
    each alert's mark are units of its own: the send falls between them."""

    def __init__(
        self,
        units: Units,
        outbound: Outbound,
        settings: DeliverySettings,
        metrics: DeliveryMetrics,
    ) -> None:
        self._units = units
        self._outbound = outbound
        self._settings = settings
        self._metrics = metrics

    async def run_once(self) -> int:
        """Claim and send owed alerts; the number sent."""
        async with self._units(autocommit=True) as unit:  # a claim is one UPDATE
            session = unit.session
            claimed = await delivery_alerts.claim(session, ALERT_BATCH, self._settings.lease_s)
            if not claimed:  # every dispatcher tick: one round trip
                return 0
            found = await repo.definitions(session, {(a.tenant, a.definition) for a in claimed})
        sent = 0
        for alert in claimed:
            definition = found.get((alert.tenant, alert.definition))
            if definition is None or not await self._send(alert, definition):
                continue
            async with self._units() as unit:
                session = unit.session
                if await delivery_alerts.mark_sent(session, alert.id, alert.claims):
                    sent += 1
                    self._metrics.alerts_sent_total.labels(channel=alert.channel).inc()
        return sent

    async def _send(self, alert: ClaimedAlert, definition: DeliveryDefinition) -> bool:
        try:
            if alert.channel == "email":
                await self._email(alert, definition.alert_emails)
                return True
            return await self._webhook(alert, definition)
        except (aiosmtplib.SMTPException, OSError) as exc:
            log.warning(
                "alert %s for delivery %s failed: %r", alert.channel, alert.delivery_id, exc
            )
            return False

    async def _email(self, alert: ClaimedAlert, recipients: list[str]) -> None:
        s = self._settings
        subject, body = _text(alert)
        message = EmailMessage()
        message["From"] = s.smtp_sender
        message["To"] = ", ".join(recipients)
        message["Subject"] = subject
        message.set_content(body)
        await aiosmtplib.send(message, **smtp_options(s))

    async def _webhook(self, alert: ClaimedAlert, definition: DeliveryDefinition) -> bool:
        assert definition.alert_webhook_url is not None
        body = orjson.dumps(
            {
                "type": "delivery.final_failed" if alert.final else "delivery.failed",
                "delivery_id": alert.delivery_id,
                "tenant": alert.tenant,
                "definition": alert.definition,
                "attempt": alert.number,
                "failures": alert.failures,
                "error": alert.error,
            }
        )
        alert_id = f"alert_{alert.delivery_id}_{alert.attempt}"
        headers = signing.headers([definition.secret], alert_id, int(time.time()), body)
        outcome = await self._outbound.post(
            definition.alert_webhook_url, body, headers, min(definition.timeout_s, 30.0)
        )
        if not outcome.ok:
            log.warning("alert webhook for %s failed: %s", alert.delivery_id, outcome.error)
        return outcome.ok
