"""Browser-facing protections: security headers on every response, and the same-origin check
that keeps other sites from posting the login form (login CSRF).

The dashboard has no JavaScript and inlines its SVG charts, whose ``<style>`` element and
``style`` attributes matplotlib writes; the policy therefore allows inline styles and nothing
else inline, loads everything else from this origin only, and forbids framing.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from perfci.core.errors import AuthError

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
)


class SecurityHeadersMiddleware:
    """Adds :data:`SECURITY_HEADERS` to every HTTP response (API answers included: they cost
    nothing there and protect a JSON body opened in a browser)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                extra = [h for h in SECURITY_HEADERS if h[0] not in present]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, with_headers)


def require_same_origin(request: Request, *, action: str = "log in") -> None:
    """Refuse a form post that a browser sent from another site.

    Browsers send ``Origin`` with every POST (``Referer`` is the fallback of older ones); it
    must name this server's own host. A post with neither is refused too: the login form is
    only ever posted by a browser, which sends them.

    Raises
    ------
    AuthError
        403, naming what was wrong.
    """
    host = request.headers.get("host", "").lower()
    sent = request.headers.get("origin") or request.headers.get("referer")
    if not sent or sent == "null":
        raise AuthError(
            "this form must be posted from the perfci page itself (the browser "
            "sent no Origin header)",
            status=403,
        )
    if urlsplit(sent).netloc.lower() != host:
        raise AuthError(
            f"this form was posted from another site; {action} on the perfci page itself",
            status=403,
        )
