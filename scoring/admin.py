"""Staff view of score runs: read-only (runs are only ever written by compute_scores)."""

from django.contrib import admin, messages

from markets.correction_views import FOLLOW_UPS, PREVIEW
from scoring.correction_preview import ScorePreview, ScoreRunFollowUp
from scoring.models import LeaderboardRow, ScoreRun
from scoring.tasks import enqueue_rescore

# The market admin's correction preview shows ranks before and after; its result page links
# the rescore once it lands.
if not any(isinstance(reader, ScorePreview) for reader in PREVIEW):
    PREVIEW.append(ScorePreview())
if not any(isinstance(follow, ScoreRunFollowUp) for follow in FOLLOW_UPS):
    FOLLOW_UPS.append(ScoreRunFollowUp())


class LeaderboardRowInline(admin.TabularInline):
    model = LeaderboardRow
    extra = 0
    can_delete = False
    fields = ("cohort", "rank", "competitor", "n_resolved", "brier", "skill_vs_market", "return_pct", "pnl", "provisional")  # fmt: skip
    readonly_fields = fields
    ordering = ["cohort", "rank"]

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(ScoreRun)
class ScoreRunAdmin(admin.ModelAdmin):
    list_display = ["id", "scope", "status", "as_of", "finished_at", "n_forecasts", "n_resolved", "methodology_version"]  # fmt: skip
    list_filter = ["scope", "status"]
    readonly_fields = [f.name for f in ScoreRun._meta.fields]
    inlines = [LeaderboardRowInline]
    actions = ["rescore"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.action(description="Recompute all scopes now (enqueues the score task)")
    def rescore(self, request, queryset):
        if enqueue_rescore():
            self.message_user(
                request, "Rescore enqueued for every scope with cohorts.", messages.INFO
            )
        else:
            self.message_user(
                request,
                "Rescore not queued: the task broker is unreachable. The hourly score run will "
                "do it once the broker is back (or run `arena score`).",
                messages.WARNING,
            )


@admin.register(LeaderboardRow)
class LeaderboardRowAdmin(admin.ModelAdmin):
    list_display = ["run", "cohort", "rank", "competitor", "n_resolved", "brier", "skill_vs_market", "return_pct", "pnl", "provisional"]  # fmt: skip
    list_filter = ["run__scope", "provisional"]
    list_select_related = ["run", "cohort", "competitor"]
    readonly_fields = [f.name for f in LeaderboardRow._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
