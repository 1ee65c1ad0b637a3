from django.db import migrations, models


class Migration(migrations.Migration):
    """The stored default home chart of each scope. Left empty here: the pages compute the
    chart until the scope's next series write (a tick, a settlement, `arena rebuild-series`)
    stores it."""

    dependencies = [
        ("cohorts", "0012_decision_rounds"),
    ]

    operations = [
        migrations.AddField(
            model_name="scopeserieshead",
            name="home_chart",
            field=models.JSONField(blank=True, editable=False, null=True),
        ),
    ]
