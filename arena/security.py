"""Security pieces Django doesn't ship: a Content-Security-Policy header and login throttling."""

from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.core.cache import cache
from django.core.exceptions import PermissionDenied

# Only our own scripts; chart data travels in json_script tags, never inline code. Plotly writes
# inline style attributes, so styles allow 'unsafe-inline' (styles cannot run code).
CSP = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        response.setdefault("Content-Security-Policy", CSP)
        response.setdefault("Referrer-Policy", "same-origin")
        response.setdefault("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
        return response


def client_ip(request) -> str:
    """The caller's IP. X-Forwarded-For is trusted only when we are told how many proxies we sit
    behind (ARENA_TRUSTED_PROXIES), and then only the entry those proxies appended."""
    hops = settings.ARENA_TRUSTED_PROXIES
    if hops > 0:
        forwarded = [
            p.strip() for p in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if p.strip()
        ]
        if len(forwarded) >= hops:
            return forwarded[-hops]
    return request.META.get("REMOTE_ADDR", "") or "unknown"


def _keys(username: str, ip: str) -> list[str]:
    return [f"login-fail:user:{username.lower()[:150]}", f"login-fail:ip:{ip}"]


class RateLimitedModelBackend(ModelBackend):
    """ModelBackend that locks out an account and a client IP after repeated failures.

    Both counters expire ARENA_LOGIN_LOCKOUT_SECONDS after the last failure; while either is over
    the limit even a correct password is refused, so guessing gains nothing.
    """

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None or username is None:
            return super().authenticate(request, username=username, password=password, **kwargs)
        keys = _keys(username, client_ip(request))
        limit = settings.ARENA_LOGIN_MAX_FAILURES
        if any((cache.get(k) or 0) >= limit for k in keys):
            raise PermissionDenied("too many failed logins; try again later")
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None:
            for k in keys:
                cache.add(k, 0, settings.ARENA_LOGIN_LOCKOUT_SECONDS)
                try:
                    cache.incr(k)
                except ValueError:
                    cache.set(k, 1, settings.ARENA_LOGIN_LOCKOUT_SECONDS)
                cache.touch(k, settings.ARENA_LOGIN_LOCKOUT_SECONDS)
        return user
