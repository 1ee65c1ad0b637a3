"""Market text stored before ingest removed invisible characters loses them: tag characters,
zero-width spaces, word joiners, soft hyphens, fillers, and joiners and variation selectors
that follow a plain ASCII character (where they never change what is drawn).

Questions, rules, titles, tags and the raw upstream copy are cleaned in every row. Outcome
names are renamed only where nothing of a competitor's refers to them (no position,
settlement or forecast: sealed history names outcomes as it was written) and the cleaned names
stay distinct; then the market's prices, last quotes, resolution and its audit trail follow the
new name. Any other market whose names would change keeps them and is flagged for staff with
the reason. It lives in cohorts because it reads cohorts' rows, and cohorts sits above markets.
"""

import json
import re
import unicodedata

from django.db import migrations

# Frozen here rather than imported, so this migration means the same whatever core.text becomes.
ALWAYS = (
    "\u00ad\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b\u2060-\u2065\u206a-\u206f"
    "\u3164\uffa0\ufeff\ufff0-\ufffb\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e0fff"
)
CONTEXTUAL = "\u200c\u200d\ufe00-\ufe0f\U000e0100-\U000e01ef"
INVISIBLE = re.compile(f"[{ALWAYS}]|(?<=[\x00-\x7f])[{CONTEXTUAL}]+")
ANY_INVISIBLE = re.compile(f"[{ALWAYS}{CONTEXTUAL}]")
TEXT_FIELDS = (
    "question", "description", "event_title", "group_item_title", "resolution_source", "category",
)  # fmt: skip
JSON_FIELDS = ("tags", "raw")


def _clean(text):
    return INVISIBLE.sub("", text)


def _clean_json(value):
    # Removing these characters from the encoded text is safe: none of them is JSON syntax or
    # part of an escape, and the encoding keeps them literal (ensure_ascii=False).
    encoded = json.dumps(value, ensure_ascii=False)
    cleaned = _clean(encoded)
    return value if cleaned == encoded else json.loads(cleaned)


def _key(name):
    return " ".join(unicodedata.normalize("NFKC", ANY_INVISIBLE.sub("", name)).casefold().split())


def clean_market_text(apps, schema_editor):
    market_model = apps.get_model("markets", "Market")
    fields = (*TEXT_FIELDS, *JSON_FIELDS, "outcomes", "last_prices", "resolved_outcome")
    for market in market_model.objects.only("pk", *fields).iterator(chunk_size=200):
        changed = []
        for name in TEXT_FIELDS:
            value = getattr(market, name)
            if value and _clean(value) != value:
                setattr(market, name, _clean(value))
                changed.append(name)
        for name in JSON_FIELDS:
            value = getattr(market, name)
            if _clean_json(value) is not value:
                setattr(market, name, _clean_json(value))
                changed.append(name)
        changed += _rename_outcomes(apps, market)
        if changed:
            market.save(update_fields=changed)


def _rename_outcomes(apps, market):
    outcomes = list(market.outcomes or [])
    renamed = {name: _clean(name) for name in outcomes if _clean(name) != name}
    if not renamed:
        return []
    cleaned = [renamed.get(name, name) for name in outcomes]
    referred = any(
        apps.get_model("cohorts", model).objects.filter(market_id=market.pk).exists()
        for model in ("Position", "Settlement", "Forecast")
    )
    collide = len({_key(name) for name in cleaned}) != len(cleaned)
    if referred or collide:
        why = "read the same once cleaned" if collide else "are named by competitors' rows"
        market.needs_attention = True
        market.attention_reason = f"outcome names hold invisible characters and {why}"[:300]
        return ["needs_attention", "attention_reason"]
    price_model = apps.get_model("markets", "PricePoint")
    change_model = apps.get_model("markets", "ResolutionChange")
    for old, new in renamed.items():
        price_model.objects.filter(market_id=market.pk, outcome=old).update(outcome=new)
        change_model.objects.filter(market_id=market.pk, from_outcome=old).update(from_outcome=new)
        change_model.objects.filter(market_id=market.pk, to_outcome=old).update(to_outcome=new)
    market.outcomes = cleaned
    market.last_prices = {renamed.get(k, k): v for k, v in (market.last_prices or {}).items()}
    market.resolved_outcome = renamed.get(market.resolved_outcome, market.resolved_outcome)
    return ["outcomes", "last_prices", "resolved_outcome"]


class Migration(migrations.Migration):
    dependencies = [
        ("cohorts", "0016_merge_key_history"),
        ("markets", "0006_resolution_change_made_at"),
    ]

    operations = [migrations.RunPython(clean_market_text, migrations.RunPython.noop)]
