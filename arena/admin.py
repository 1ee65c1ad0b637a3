from axes.admin import AccessAttemptAdmin as AxesAccessAttemptAdmin
from axes.models import AccessAttempt
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse

from arena import login
from arena.attention import (
    attention_count,
    attention_items,
    lineup_choices,
    retrying_decisions,
)
from cohorts.decisions import outside
from core import clock
from core.models import JobRun


@admin.register(JobRun)
class JobRunAdmin(admin.ModelAdmin):
    list_display = ["job", "status", "started_at", "finished_at"]
    list_filter = ["job", "status"]
    readonly_fields = ["job", "status", "started_at", "finished_at", "summary", "error"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


# The admin index opens with what needs a human and a link to it (arena_index.html).
admin.site.index_template = "admin/arena_index.html"

# What the attention page shows; staff without these permissions are refused (it was open to any
# staff account, whatever its permissions).
ATTENTION_PERMISSIONS = ("markets.view_market", "cohorts.view_decision", "core.view_jobrun")


def attention_view(request):
    if not request.user.has_perms(ATTENTION_PERMISSIONS):
        raise PermissionDenied(
            "the attention page needs view access to markets, decisions and jobs"
        )
    items = attention_items()
    choices = lineup_choices()
    for proposal in items["lineup_proposals"]:  # who a new model may become a release of
        proposal.release_choices = choices.get(proposal.catalog, [])
    context = {
        **admin.site.each_context(request),
        "title": "Needs attention",
        "items": items,
        "total": attention_count(items),
        "retrying": retrying_decisions(),
        "awaiting_outside": outside.awaiting(clock.now()),
    }
    return TemplateResponse(request, "admin/arena_attention.html", context)


# Login throttling (arena/login.py): attempts and locks, and the action that lifts a lock.
admin.site.unregister(AccessAttempt)


@admin.register(AccessAttempt)
class AccessAttemptAdmin(AxesAccessAttemptAdmin):
    list_display = ["attempt_time", "username", "ip_address", "failures_since_start",
                    "locked_until", "user_agent"]  # fmt: skip
    list_filter = ["attempt_time"]
    actions = ["unlock"]

    @admin.display(description="locked until (UTC)")
    def locked_until(self, obj: AccessAttempt) -> str:
        state = login.lock_state(obj.username, obj.ip_address, clock.now())
        return state.until.strftime("%Y-%m-%d %H:%M:%S") if state.locked else "—"

    @admin.action(description="Unlock: forget these failed attempts", permissions=["delete"])
    def unlock(self, request, queryset):
        self.log_deletions(request, queryset)  # who unlocked whom, in the admin history
        count, _ = queryset.delete()
        self.message_user(
            request, f"Unlocked: {count} attempt record(s) forgotten.", messages.SUCCESS
        )
