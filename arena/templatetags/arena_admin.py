"""Template tags of the staff side: the attention summary on the admin index."""

from django import template

from arena.attention import attention_counts

register = template.Library()


@register.simple_tag
def attention_summary() -> dict:
    counts = attention_counts()
    return {"total": sum(counts.values()), "parts": [(k, n) for k, n in counts.items() if n]}
