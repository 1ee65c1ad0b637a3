"""Market text stored before ingest cleaned it loses its bidi controls, so a stored "seY" can no
longer display as "Yes". Only rows that hold one are read and written (one indexed-free scan
with a regex filter); outcome names are left alone, because positions, forecasts and prices
refer to them by name and the next sync brings the cleaned names for open markets."""

from django.db import migrations
from django.db.models import Q

# Frozen here rather than imported, so this migration means the same whatever core.text becomes.
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
FIELDS = ("question", "description", "event_title", "group_item_title")


def strip_bidi(apps, schema_editor):
    market_model = apps.get_model("markets", "Market")
    pattern = f"[{BIDI}]"
    table = str.maketrans("", "", BIDI)
    match = Q()
    for name in FIELDS:
        match |= Q(**{f"{name}__regex": pattern})
    for market in market_model.objects.filter(match).only("pk", *FIELDS).iterator():
        for name in FIELDS:
            setattr(market, name, getattr(market, name).translate(table))
        market.save(update_fields=list(FIELDS))


class Migration(migrations.Migration):
    dependencies = [("markets", "0002_resolution_change_on_clock")]

    operations = [migrations.RunPython(strip_bidi, migrations.RunPython.noop)]
