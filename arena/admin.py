from django.contrib import admin
from django.template.response import TemplateResponse

from arena.attention import attention_count, attention_items
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


def attention_view(request):
    items = attention_items()
    context = {
        **admin.site.each_context(request),
        "title": "Needs attention",
        "items": items,
        "total": attention_count(items),
    }
    return TemplateResponse(request, "admin/arena_attention.html", context)
