"""Staff views of the competition engine. Money and audit rows are read-only: they change only
through the services (execution, settlement), never by hand-editing a balance."""

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError

from cohorts.decisions import admin as decision_admin  # noqa: F401  (registers the decision audit)
from cohorts.models import (
    Cohort,
    Decision,
    Entry,
    LedgerEntry,
    Position,
    Settlement,
    Snapshot,
    Trade,
    Universe,
)
from cohorts.scope import on_live_path
from cohorts.seals.models import DecisionDigest, EventLogEntry, SealPublication, WeekSeal
from core import clock


class ReadOnlyAdmin(admin.ModelAdmin):
    """Audit data: viewable, never added, edited or deleted from the admin."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class EntryInline(ReadOnlyInline):
    model = Entry
    fields = ("competitor", "replicate", "cash", "initial_balance")
    readonly_fields = fields


class PositionInline(ReadOnlyInline):
    model = Position
    fields = (
        "market",
        "outcome",
        "shares",
        "cost_basis",
        "realized_pnl",
        "status",
        "opened_at",
        "closed_at",
    )
    readonly_fields = fields


def cohort_started(cohort: Cohort) -> bool:
    """Whether the cohort is running: a live one from its first Sunday, any kind from its first
    frozen universe or claimed decision (replay and demo run on their own simulated clock)."""
    if on_live_path(cohort.kind) and cohort.week_start <= clock.now():
        return True
    return (
        Universe.objects.filter(cohort=cohort).exists()
        or Decision.objects.filter(entry__cohort=cohort).exists()
    )


MAX_DECISION_WEEKS = 520  # ten years of Sundays: past that a number is a typo

STATUS_REFUSED = (
    "The status of a running cohort follows its calendar and is set by the snapshot job: "
    "deciding weekly for its decision weeks, then tracking until every position settles, then "
    "completed. Changed by hand it would stop its decisions or its snapshots (or restart them "
    "after the sealed weeks), so it cannot be edited here."
)
WEEKS_REFUSED = (
    "The number of decision weeks cannot change once the cohort has started (week 1 began "
    "{start:%Y-%m-%d}): its models were told in their prompts how many weeks there are, and "
    "its sealed weeks and scores count on it."
)


class CohortForm(forms.ModelForm):
    """Refuses, as form errors, the edits that would break a running cohort."""

    class Meta:
        model = Cohort
        fields = ["status", "decision_weeks", "label", "notes"]  # the rest is read-only

    def clean(self):
        cleaned = super().clean() or self.cleaned_data
        cohort = self.instance  # still the stored values: the form has not been applied yet
        weeks = cleaned.get("decision_weeks")
        if weeks is not None and not 1 <= weeks <= MAX_DECISION_WEEKS:
            self.add_error(
                "decision_weeks", f"A cohort decides for 1 to {MAX_DECISION_WEEKS} weeks."
            )
        if cohort.pk is None or not {"status", "decision_weeks"} & set(self.changed_data):
            return cleaned
        if not cohort_started(cohort):
            return cleaned
        if "status" in self.changed_data:
            self.add_error("status", ValidationError(STATUS_REFUSED, code="running"))
        if "decision_weeks" in self.changed_data:
            message = WEEKS_REFUSED.format(start=cohort.week_start)
            self.add_error("decision_weeks", ValidationError(message, code="running"))
        return cleaned


@admin.register(Cohort)
class CohortAdmin(admin.ModelAdmin):
    form = CohortForm
    list_display = [
        "__str__",
        "kind",
        "week_start",
        "status",
        "decision_weeks",
        "methodology_version",
    ]
    list_filter = ["kind", "status"]
    readonly_fields = [
        "kind",
        "week_start",
        "initial_balance",
        "methodology_version",
        "methodology_hash",
        "created_at",
        "completed_at",
    ]
    inlines = [EntryInline]

    def has_add_permission(self, request, obj=None):
        return False  # cohorts are opened by open_cohort, with their entries and deposits

    def get_actions(self, request):
        # The bulk delete would skip the per-cohort check below.
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def has_delete_permission(self, request, obj=None):
        # Deleting a running cohort would take its sealed weeks and ledger with it.
        if obj is not None and cohort_started(obj):
            return False
        return super().has_delete_permission(request, obj)


@admin.register(Entry)
class EntryAdmin(admin.ModelAdmin):
    list_display = ["__str__", "cohort", "competitor", "replicate", "cash"]
    list_filter = ["cohort__kind", "cohort"]
    list_select_related = ["cohort", "competitor"]
    search_fields = ["competitor__slug", "competitor__display_name"]
    readonly_fields = [
        "cohort",
        "competitor",
        "release",
        "replicate",
        "cash",
        "initial_balance",
        "created_at",
    ]
    inlines = [PositionInline]

    def has_add_permission(self, request, obj=None):
        return False  # entries are created by open_cohort, with their deposit


@admin.register(Position)
class PositionAdmin(ReadOnlyAdmin):
    list_display = [
        "pk",
        "entry",
        "market",
        "outcome",
        "shares",
        "cost_basis",
        "realized_pnl",
        "status",
    ]
    list_filter = ["status"]
    list_select_related = ["entry__competitor", "market"]
    raw_id_fields = ["entry", "market"]


@admin.register(Trade)
class TradeAdmin(ReadOnlyAdmin):
    list_display = [
        "pk",
        "entry",
        "side",
        "amount",
        "shares",
        "price",
        "realized_pnl",
        "executed_at",
    ]
    list_filter = ["side"]
    list_select_related = ["entry__competitor"]
    raw_id_fields = ["entry", "decision", "position"]


@admin.register(LedgerEntry)
class LedgerEntryAdmin(ReadOnlyAdmin):
    list_display = ["pk", "entry", "kind", "amount", "memo", "created_at"]
    list_filter = ["kind"]
    list_select_related = ["entry__competitor"]
    raw_id_fields = ["entry", "trade", "settlement"]


@admin.register(Snapshot)
class SnapshotAdmin(ReadOnlyAdmin):
    list_display = [
        "entry",
        "ts",
        "cash",
        "positions_value",
        "total",
        "realized_pnl",
        "unrealized_pnl",
    ]
    list_select_related = ["entry__competitor"]
    date_hierarchy = "ts"


@admin.register(Settlement)
class SettlementAdmin(ReadOnlyAdmin):
    list_display = [
        "pk",
        "market",
        "position",
        "kind",
        "outcome",
        "payout",
        "settled_at",
        "reversed_at",
    ]
    list_filter = ["kind"]
    list_select_related = ["market", "position"]
    raw_id_fields = ["market", "position"]


@admin.register(Universe)
class UniverseAdmin(ReadOnlyAdmin):
    list_display = ["cohort", "week", "frozen_at", "content_hash"]
    list_select_related = ["cohort"]


# Sealing records (cohorts/seals/sealing.py): append-only, never edited here.


@admin.register(WeekSeal)
class WeekSealAdmin(ReadOnlyAdmin):
    list_display = ["cohort", "week", "seq", "reason", "count", "root", "sealed_at"]
    list_filter = ["scope", "reason"]
    list_select_related = ["cohort"]


@admin.register(DecisionDigest)
class DecisionDigestAdmin(ReadOnlyAdmin):
    list_display = ["cohort", "week", "seq", "entry", "decision", "state", "status", "amendment"]
    list_filter = ["scope", "state", "amendment"]
    raw_id_fields = ["cohort", "entry", "decision"]
    exclude = ["record"]  # compressed bytes; /exports/seals.json shows the records


@admin.register(EventLogEntry)
class EventLogEntryAdmin(ReadOnlyAdmin):
    list_display = ["scope", "seq", "kind", "ref", "record_hash", "created_at"]
    list_filter = ["scope", "kind"]
    exclude = ["record"]


@admin.register(SealPublication)
class SealPublicationAdmin(ReadOnlyAdmin):
    list_display = ["seal", "target", "published_at", "attempts", "http_status", "error"]
    list_select_related = ["seal"]
