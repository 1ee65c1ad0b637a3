"""The overview chunks now hold each step's growth factor (what the home chart compounds)
instead of a plain mean return: recompute them from the stored entry chunks.

Uses this migration's historical models, so it keeps working whatever the models become later.
"""

from types import SimpleNamespace

from django.db import migrations


def recompute(apps, schema_editor):
    from cohorts.series.overview import rebuild_overviews

    rebuild_overviews(
        SimpleNamespace(
            Entry=apps.get_model("cohorts", "Entry"),
            SeriesHead=apps.get_model("cohorts", "SeriesHead"),
            SeriesChunk=apps.get_model("cohorts", "SeriesChunk"),
            ScopeSeriesChunk=apps.get_model("cohorts", "ScopeSeriesChunk"),
        )
    )


class Migration(migrations.Migration):
    dependencies = [("cohorts", "0010_entry_decision_release")]

    operations = [migrations.RunPython(recompute, migrations.RunPython.noop)]
