# Decision, LLMCall and Forecast moved here from the agents app: state only, their tables
# (agents_decision, agents_llmcall, agents_forecast) and every row stay as they are. The content
# types follow, so admin history and permissions stay attached to the same rows.

import django.db.models.deletion
from django.db import migrations, models

MOVED = ("decision", "llmcall", "forecast")


def _relabel(apps, old: str, new: str) -> None:
    content_type = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        if not content_type.objects.filter(app_label=new, model=model).exists():
            content_type.objects.filter(app_label=old, model=model).update(app_label=new)


class Migration(migrations.Migration):
    dependencies = [
        ("cohorts", "0004_backfill_chart_series"),
        ("markets", "0001_initial"),
        ("agents", "0005_alter_decision_cost_usd_alter_llmcall_cost_usd"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name='Decision',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('week', models.PositiveSmallIntegerField(help_text='1-based week of the cohort')),
                        ('status', models.CharField(choices=[('claimed', 'Claimed (running)'), ('done', 'Done'), ('skipped', 'Skipped'), ('failed', 'Failed'), ('retryable', 'Retryable')], default='claimed', max_length=10)),
                        ('claim_token', models.CharField(blank=True, max_length=40)),
                        ('claimed_at', models.DateTimeField()),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('decided_at', models.DateTimeField(blank=True, help_text='Clock time of the decision', null=True)),
                        ('action', models.CharField(blank=True, choices=[('BET', 'Bet'), ('SELL', 'Sell'), ('HOLD', 'Hold')], max_length=4)),
                        ('reasoning', models.TextField(blank=True)),
                        ('parsed', models.JSONField(blank=True, null=True)),
                        ('validation_errors', models.JSONField(blank=True, default=list)),
                        ('hold_reason', models.TextField(blank=True, help_text='Why the decision ended as HOLD, if forced')),
                        ('error', models.TextField(blank=True)),
                        ('universe_hash', models.CharField(blank=True, max_length=64)),
                        ('prompt_version', models.CharField(blank=True, max_length=20)),
                        ('prompt_sha256', models.CharField(blank=True, max_length=64)),
                        ('system_prompt', models.TextField(blank=True)),
                        ('user_prompt', models.TextField(blank=True)),
                        ('forecast_sample', models.JSONField(blank=True, default=list)),
                        ('cash_before', models.DecimalField(blank=True, decimal_places=2, max_digits=14, null=True)),
                        ('tokens_in', models.PositiveIntegerField(default=0)),
                        ('tokens_out', models.PositiveIntegerField(default=0)),
                        ('cost_usd', models.DecimalField(decimal_places=10, default=0, max_digits=16)),
                        ('latency_ms', models.PositiveIntegerField(default=0)),
                        ('entry', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='decisions', to='cohorts.entry')),
                        ('universe', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='decisions', to='cohorts.universe')),
                    ],
                    options={
                        'db_table': 'agents_decision',
                        'ordering': ['-claimed_at', '-id'],
                    },
                ),
                migrations.AlterField(
                    model_name='decisiondigest',
                    name='decision',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='digests', to='cohorts.decision'),
                ),
                migrations.AlterField(
                    model_name='trade',
                    name='decision',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='trades', to='cohorts.decision'),
                ),
                migrations.CreateModel(
                    name='Forecast',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('outcome', models.CharField(max_length=200)),
                        ('probability', models.FloatField()),
                        ('market_price', models.FloatField(blank=True, help_text='Price shown at decision time', null=True)),
                        ('source', models.CharField(choices=[('bet', 'With a bet'), ('sample', 'Forecast sample'), ('other', 'Volunteered')], default='sample', max_length=10)),
                        ('created_at', models.DateTimeField()),
                        ('decision', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='forecasts', to='cohorts.decision')),
                        ('entry', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='forecasts', to='cohorts.entry')),
                        ('market', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='forecasts', to='markets.market')),
                    ],
                    options={
                        'db_table': 'agents_forecast',
                    },
                ),
                migrations.CreateModel(
                    name='LLMCall',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('attempt', models.PositiveSmallIntegerField()),
                        ('phase', models.CharField(default='initial', help_text='initial or repair', max_length=10)),
                        ('url', models.CharField(blank=True, max_length=300)),
                        ('request', models.JSONField(default=dict)),
                        ('raw_response', models.TextField(blank=True)),
                        ('http_status', models.PositiveSmallIntegerField(blank=True, null=True)),
                        ('error', models.TextField(blank=True)),
                        ('error_kind', models.CharField(blank=True, max_length=20)),
                        ('prompt_tokens', models.PositiveIntegerField(blank=True, null=True)),
                        ('completion_tokens', models.PositiveIntegerField(blank=True, null=True)),
                        ('reasoning_tokens', models.PositiveIntegerField(blank=True, null=True)),
                        ('cost_usd', models.DecimalField(blank=True, decimal_places=10, max_digits=16, null=True)),
                        ('cost_source', models.CharField(blank=True, max_length=20)),
                        ('latency_ms', models.PositiveIntegerField(default=0)),
                        ('served_model', models.CharField(blank=True, max_length=200)),
                        ('generation_id', models.CharField(blank=True, max_length=200)),
                        ('finish_reason', models.CharField(blank=True, max_length=40)),
                        ('started_at', models.DateTimeField()),
                        ('decision', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='llm_calls', to='cohorts.decision')),
                    ],
                    options={
                        'db_table': 'agents_llmcall',
                        'ordering': ['decision', 'attempt'],
                    },
                ),
                migrations.AddIndex(
                    model_name='decision',
                    index=models.Index(fields=['status', 'claimed_at'], name='decision_status_idx'),
                ),
                migrations.AddConstraint(
                    model_name='decision',
                    constraint=models.UniqueConstraint(fields=('entry', 'week'), name='decision_entry_week_uniq'),
                ),
                migrations.AddIndex(
                    model_name='forecast',
                    index=models.Index(fields=['market', 'created_at'], name='forecast_market_idx'),
                ),
                migrations.AddConstraint(
                    model_name='forecast',
                    constraint=models.UniqueConstraint(fields=('decision', 'market', 'outcome'), name='forecast_decision_market_outcome_uniq'),
                ),
                migrations.AddConstraint(
                    model_name='forecast',
                    constraint=models.CheckConstraint(condition=models.Q(('probability__gte', 0), ('probability__lte', 1)), name='forecast_probability_range'),
                ),
                migrations.AddConstraint(
                    model_name='llmcall',
                    constraint=models.UniqueConstraint(fields=('decision', 'attempt'), name='llmcall_decision_attempt_uniq'),
                ),
            ],
        ),
        migrations.RunPython(
            lambda apps, editor: _relabel(apps, "agents", "cohorts"),
            lambda apps, editor: _relabel(apps, "cohorts", "agents"),
        ),
    ]
