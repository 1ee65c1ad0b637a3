from django.db import migrations, models


class Migration(migrations.Migration):
    """Who holds a decision's claim, and the take-overs of claims whose runner died."""

    dependencies = [
        ("cohorts", "0013_scope_home_chart"),
    ]

    operations = [
        migrations.AddField(
            model_name="decision",
            name="claimed_by",
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.AddField(
            model_name="decision",
            name="takeovers",
            field=models.JSONField(blank=True, default=list),
        ),
    ]
