# JobRun now lives in core (the ground package); its table stays, so this is state only.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("arena", "0001_initial"),
        ("core", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="JobRun")],
            database_operations=[],
        ),
    ]
