"""notifyhub: a notification hub with per-user Redis inboxes and live Server-Sent Events."""
