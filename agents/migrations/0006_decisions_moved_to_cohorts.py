# Decision, LLMCall and Forecast now live in the cohorts app (cohorts 0005 takes them over with
# their tables); here they leave the agents app's state only, nothing in the database changes.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0005_alter_decision_cost_usd_alter_llmcall_cost_usd"),
        ("cohorts", "0005_decisions_move_here"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.DeleteModel(name="Forecast"),
                migrations.DeleteModel(name="LLMCall"),
                migrations.DeleteModel(name="Decision"),
            ],
        ),
    ]
