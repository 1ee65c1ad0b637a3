"""Build the chart series of an existing database from its snapshots (cohorts/series.py).

Runs once on `migrate`; `arena rebuild-series` does the same on demand. Uses this migration's
historical models, so it keeps working whatever the models become later.
"""

from types import SimpleNamespace

from django.db import migrations


def backfill(apps, schema_editor):
    from cohorts.series import write as series

    models = SimpleNamespace(
        Competitor=apps.get_model("agents", "Competitor"),
        Entry=apps.get_model("cohorts", "Entry"),
        Snapshot=apps.get_model("cohorts", "Snapshot"),
        SeriesHead=apps.get_model("cohorts", "SeriesHead"),
        SeriesChunk=apps.get_model("cohorts", "SeriesChunk"),
        ScopeSeriesHead=apps.get_model("cohorts", "ScopeSeriesHead"),
        ScopeSeriesChunk=apps.get_model("cohorts", "ScopeSeriesChunk"),
    )
    series.rebuild_all(models=models)


class Migration(migrations.Migration):
    dependencies = [("cohorts", "0003_chart_series")]

    operations = [migrations.RunPython(backfill, migrations.RunPython.noop)]
