# JobRun moved here from the `arena` app: state only, the table (arena_jobrun) stays as it is.

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("arena", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="JobRun",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("job", models.CharField(db_index=True, max_length=40)),
                        ("status", models.CharField(choices=[("running", "Running"), ("ok", "OK"), ("failed", "Failed")], default="running", max_length=10)),
                        ("started_at", models.DateTimeField()),
                        ("finished_at", models.DateTimeField(blank=True, null=True)),
                        ("summary", models.JSONField(blank=True, default=dict)),
                        ("error", models.TextField(blank=True)),
                    ],
                    options={
                        "db_table": "arena_jobrun",
                        "ordering": ["-started_at"],
                        "indexes": [models.Index(fields=["job", "status", "-finished_at"], name="jobrun_latest_idx")],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
