"""`PUT /v1/me/preferences`: a field left out stays as it is; an explicit null clears it."""

from __future__ import annotations

from typing import Any

URL = "/v1/me/preferences"


async def test_a_field_left_out_is_unchanged_and_null_clears(hub: Any, make_token: Any) -> None:
    me = {"Authorization": f"Bearer {make_token('prefs-put')}"}
    billing = {"billing": {"inbox": True, "push": False, "email": True}}
    first = await hub.client.put(URL, json={"categories": billing, "locale": "pt-BR"}, headers=me)
    assert first.status_code == 200, first.text

    kept = await hub.client.put(URL, json={"categories": {}}, headers=me)
    assert kept.json() == {"categories": {}, "locale": "pt-BR"}
    again = await hub.client.put(URL, json={"locale": "de"}, headers=me)
    assert again.json() == {"categories": {}, "locale": "de"}
    await hub.client.put(URL, json={"categories": billing}, headers=me)
    assert (await hub.client.put(URL, json={}, headers=me)).json() == {
        "categories": billing,
        "locale": "de",
    }
    cleared = await hub.client.put(URL, json={"locale": None}, headers=me)
    assert cleared.json() == {"categories": billing, "locale": None}
    assert (await hub.client.get(URL, headers=me)).json() == cleared.json()
