"""The app's gate, as plain ASGI middleware: token, allowed hosts, cross-site requests, body size, nosniff.

Every HTTP request passes here before any route:

- with a token set (the server listens beyond loopback), the request must carry it: the header
  ``Authorization: Bearer TOKEN``, the cookie this middleware sets, or ``?token=TOKEN`` (the address
  the server prints; answered with the cookie, so the page's later requests carry it); else 401;
- with allowed hosts set, the ``Host`` header must name one of them (a DNS-rebinding page
  cannot reach a loopback server under its own name); else 400;
- a state-changing request (POST, PUT, PATCH, DELETE) sent by a browser from another site (its
  ``Origin`` not this host, or ``Sec-Fetch-Site: cross-site``/``same-site``) gets 403; scripts that
  send neither header pass;
- a request body over ``max_body`` bytes gets 413: refused on its ``Content-Length``, and counted
  while it is read otherwise;
- every response carries ``X-Content-Type-Options: nosniff``.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable, Iterable
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs, urlsplit

Scope = dict[str, Any]
Message = dict[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]]

COOKIE = "style_transfer_token"
UNSAFE_METHODS = ("POST", "PUT", "PATCH", "DELETE")


class BodyTooLarge(Exception):
    """A request body passed the limit while it was read."""


class Guard:
    """Wrap an ASGI app (``app.add_middleware(Guard, token=..., allowed_hosts=..., max_body=...)``)."""

    def __init__(self, app: ASGIApp, *, token: str | None = None, allowed_hosts: Iterable[str] | None = None,
                 max_body: int = 50_000_000) -> None:
        self.app = app
        self.token = token
        self.allowed_hosts = None if allowed_hosts is None else {h.lower() for h in allowed_hosts}
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Message]],
                       send: Callable[[Message], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host = headers.get("host", "")
        if self.allowed_hosts is not None and _hostname(host) not in self.allowed_hosts:
            await _answer(send, 400, f"host {host!r} is not served here (use the address the server printed)")
            return
        set_cookie = False
        if self.token is not None:
            given = _bearer(headers.get("authorization", "")) or _cookie(headers.get("cookie", ""))
            query = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token", [None])[0]
            if given is None and query is not None:
                given, set_cookie = query, True
            if given is None or not secrets.compare_digest(given.encode(), self.token.encode()):
                await _answer(send, 401, "a token is needed: open the address the server printed, or send "
                                         "'Authorization: Bearer TOKEN'")
                return
        if scope["method"] in UNSAFE_METHODS and _cross_site(headers, host):
            await _answer(send, 403, "cross-site request refused")
            return
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body:
            await _answer(send, 413, f"the request is {int(length):,} bytes, over the limit of {self.max_body:,} bytes")
            return

        received = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body:
                    raise BodyTooLarge()
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                extra = [(b"x-content-type-options", b"nosniff")]
                if set_cookie and self.token is not None:
                    extra.append((b"set-cookie", f"{COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict"
                                  .encode("latin-1")))
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        try:
            await self.app(scope, counted_receive, guarded_send)
        except BodyTooLarge:
            if not started:
                await _answer(send, 413, f"the request body is over the limit of {self.max_body:,} bytes")


def _hostname(host: str) -> str:
    """The name in a Host header, without the port (IPv6 in brackets kept as written inside)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if ":" in host else host


def _bearer(value: str) -> str | None:
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _cookie(value: str) -> str | None:
    if not value:
        return None
    cookies: SimpleCookie = SimpleCookie()
    try:
        cookies.load(value)
    except Exception:  # a malformed Cookie header is no token
        return None
    morsel = cookies.get(COOKIE)
    return morsel.value if morsel is not None else None


def _cross_site(headers: dict[str, str], host: str) -> bool:
    site = headers.get("sec-fetch-site")
    if site in ("cross-site", "same-site"):
        return True
    origin = headers.get("origin")
    if origin is None:
        return False
    if origin == "null":
        return True
    return urlsplit(origin).netloc.lower() != host.lower()


async def _answer(send: Callable[[Message], Awaitable[None]], status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"x-content-type-options", b"nosniff")]})
    await send({"type": "http.response.body", "body": body})
