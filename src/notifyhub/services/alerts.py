"""Failure alerts: e-mail over SMTP and/or an alert webhook, one per owed alert row.

Alert rows are written in the same transaction as the settlement that owes them, so an
alert is never owed twice; they are claimed with a lease and marked sent `WHERE claims =
<the claim>`, so a normal run sends each exactly once (a crash between the send and the
mark re-sends it after the lease: at-least-once, like everything we promise). A try that
fails (the SMTP server or the alert webhook refuses or is down) is tried again after a
wait that doubles each time; after `deliveries.alert_tries` tries, or at once when its
definition was deleted, the alert is given up: an error in the log and a metric, never
retried forever.
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
MAX_ALERT_WAIT_S = 3600.0
"""The longest wait between two tries of one alert."""


def _nobody(alert: ClaimedAlert, definition: DeliveryDefinition) -> str | None:
    """Why nobody is left to tell on the alert's channel, when a `PUT` of its definition
    took the addresses away after the alert was owed; else None."""
    if alert.channel == "email" and not definition.alert_emails:
        return "its delivery definition has no alert e-mails any more"
    if alert.channel == "webhook" and definition.alert_webhook_url is None:
        return "its delivery definition has no alert webhook any more"
    return None


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
            if definition is None:
                await self._give_up(alert, "its delivery definition was deleted")
            elif (nobody := _nobody(alert, definition)) is not None:
                await self._give_up(alert, nobody)
            elif await self._send(alert, definition):
                async with self._units() as unit:
                    if await delivery_alerts.mark_sent(unit.session, alert.id, alert.claims):
                        sent += 1
                        self._metrics.alerts_sent_total.labels(channel=alert.channel).inc()
            else:
                self._metrics.alerts_failed_total.labels(channel=alert.channel).inc()
                if alert.claims >= self._settings.alert_tries:
                    await self._give_up(alert, f"{alert.claims} tries failed")
                else:
                    await self._retry_later(alert)
        return sent

    async def _retry_later(self, alert: ClaimedAlert) -> None:
        """Due again after `alert_retry_s`, doubled for each earlier try, at most an hour."""
        wait_s = min(self._settings.alert_retry_s * 2 ** (alert.claims - 1), MAX_ALERT_WAIT_S)
        async with self._units() as unit:
            await delivery_alerts.retry_in(unit.session, alert.id, alert.claims, wait_s)

    async def _give_up(self, alert: ClaimedAlert, why: str) -> None:
        async with self._units() as unit:
            if not await delivery_alerts.give_up(unit.session, alert.id, alert.claims):
                return  # claimed again meanwhile (this claim's lease ran out)
        self._metrics.alerts_given_up_total.labels(channel=alert.channel).inc()
        log.error(
            "alert %s for delivery %s (%s/%s, attempt %d) given up: %s",
            alert.channel,
            alert.delivery_id,
            alert.tenant,
            alert.definition,
            alert.number,
            why,
        )

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
