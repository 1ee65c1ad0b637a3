"""Staff views of the competition engine. Money and audit rows are read-only: they change only
through the services (execution, settlement), never by hand-editing a balance."""

from django.contrib import admin

from cohorts import decision_admin  # noqa: F401  (registers the decision audit)
from cohorts.models import (
    Cohort,
    Entry,
    LedgerEntry,
    Position,
    Settlement,
    Snapshot,
    Trade,
    Universe,
)
from cohorts.seal_models import DecisionDigest, EventLogEntry, SealPublication, WeekSeal


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


@admin.register(Cohort)
class CohortAdmin(admin.ModelAdmin):
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


@admin.register(Entry)
class EntryAdmin(admin.ModelAdmin):
    list_display = ["__str__", "cohort", "competitor", "replicate", "cash"]
    list_filter = ["cohort__kind", "cohort"]
    list_select_related = ["cohort", "competitor"]
    search_fields = ["competitor__slug", "competitor__display_name"]
    readonly_fields = ["cohort", "competitor", "replicate", "cash", "initial_balance", "created_at"]
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


# Sealing records (cohorts/seals.py): append-only, never edited here.


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
