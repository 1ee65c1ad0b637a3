"""Security pieces Django doesn't ship: a Content-Security-Policy header and a debug mode that
cannot leak. Who a client is (address and network) lives in core/clients.py.
"""

import ipaddress
import re

from django.conf import settings
from django.http import HttpResponseForbidden
from django.views.debug import SafeExceptionReporterFilter

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


def _is_loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr.split("%")[0]).is_loopback
    except ValueError:
        return False


class LoopbackOnlyWhenDebugMiddleware:
    """With DEBUG on, answer only clients on this machine: a debug page shows code, settings and
    the request, which nobody else may see (settings also refuse non-loopback ALLOWED_HOSTS while
    DEBUG is on). Outermost middleware, so no other code runs for a refused client."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if settings.DEBUG and not _is_loopback(request.META.get("REMOTE_ADDR", "")):
            return HttpResponseForbidden(
                "This server runs with DEBUG on and answers only 127.0.0.1; set DEBUG=0 to serve "
                "other addresses.\n",
                content_type="text/plain",
            )
        return self.get_response(request)


class SecretsFilter(SafeExceptionReporterFilter):
    """Debug pages and error mails hide every setting or variable that can carry a credential:
    Django's default list misses connection URLs (DATABASE_URL, REDIS_CACHE_URL,
    CELERY_BROKER_URL hold passwords, and so does CACHES' LOCATION), and environment variables
    shown in request.META."""

    hidden_settings = re.compile(
        "API|TOKEN|KEY|SECRET|PASS|SIGNATURE|HTTP_COOKIE|URL|DSN|DATABASE|BROKER|REDIS|AUTH"
        "|CACHES|LOCATION",
        flags=re.IGNORECASE,
    )

    def get_safe_request_meta(self, request):
        if not hasattr(request, "META"):
            return {}
        # Only HTTP headers and a few CGI variables; the process environment stays out.
        keep = {"REMOTE_ADDR", "REQUEST_METHOD", "PATH_INFO", "QUERY_STRING", "SERVER_NAME",
                "SERVER_PORT", "CONTENT_TYPE", "CONTENT_LENGTH"}  # fmt: skip
        return {
            k: self.cleanse_setting(k, v)
            for k, v in request.META.items()
            if k.startswith("HTTP_") or k in keep
        }
