"""The export gate at the door: `/exports/<what>.<fmt>` is admitted (files.admit) before
any other middleware runs.

An attack run flooded the site with 50 concurrent expensive exports: each refusal was already a
429, but it first went through sessions, auth, CSRF, axes and the page cache, and the flood of
those passes competed with the cached pages for threads and CPU (cached `/` p99 from 13 ms to
over 1 s). Here a refusal is a cache read and a one-line 429 with Retry-After; an admitted
export goes on through the whole stack as before (host check, headers, the view), carrying its
admission, and its slot is freed here unless the streaming body took it over.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse

from web.exports import files, gate

PATH = re.compile(r"/exports/(?P<what>[-\w]+)\.(?P<fmt>[-\w]+)")


class ExportDoorMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        found = PATH.fullmatch(request.path_info)
        if (
            found is None
            or request.method not in ("GET", "HEAD")
            or found["what"] not in files.WHATS
            or found["fmt"] not in files.FORMATS
        ):
            return self.get_response(request)  # the view answers (404, 405) as it would
        try:
            request.get_host()
        except DisallowedHost:
            return self.get_response(request)  # its 400 comes from the stack, as for any page
        admission = files.admit(request, found["what"], found["fmt"])
        if admission is None:
            return gate.busy()
        request.export_admission = admission  # type: ignore[attr-defined]
        try:
            return self.get_response(request)
        finally:
            admission.settle()
