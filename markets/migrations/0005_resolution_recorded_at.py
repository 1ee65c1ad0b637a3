from django.db import migrations, models
from django.db.models import F, OuterRef, Subquery
from django.db.models.functions import Coalesce


def fill_recorded_at(apps, schema_editor):
    """Each market's latest audit row is when the arena last recorded its resolution state; a
    resolution with no audit row (data from before the trail) is taken as recorded when it
    resolved, which is how scoring read it until the field existed."""
    Market = apps.get_model("markets", "Market")
    ResolutionChange = apps.get_model("markets", "ResolutionChange")
    latest = ResolutionChange.objects.filter(market_id=OuterRef("pk")).order_by(
        "-changed_at", "-id"
    )
    Market.objects.update(
        resolution_recorded_at=Coalesce(Subquery(latest.values("changed_at")[:1]), F("resolved_at"))
    )


class Migration(migrations.Migration):
    dependencies = [
        ("markets", "0004_rehearsal_scope"),
    ]

    operations = [
        migrations.AddField(
            model_name="market",
            name="resolution_recorded_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(fill_recorded_at, migrations.RunPython.noop),
    ]
