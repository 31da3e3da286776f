"""Certificate pinning: TLS to a server whose self-signed certificate has a known SHA-256
fingerprint (``rtemu serve --tls-dir`` prints it), checked before any request is sent."""

from __future__ import annotations

import hashlib
import hmac
import ssl
import string

#: What a fingerprint may start with; what follows is what ``rtemu serve`` prints.
PREFIX = "sha256:"


class PinMismatch(ssl.SSLCertVerificationError):
    """The server showed a certificate other than the pinned one."""


def parse_fingerprint(text: str) -> bytes:
    """The 32 bytes of a SHA-256 certificate fingerprint: 64 hex digits of either case, colons
    between pairs allowed (as ``rtemu serve --tls-dir`` and ``openssl x509 -fingerprint``
    print it, and as the credentials file holds it), optionally after ``sha256:``.

    Raises:
        ValueError: ``text`` is not one.
    """
    body = text.strip()
    if body[: len(PREFIX)].lower() == PREFIX:
        body = body[len(PREFIX) :]
    digits = body.replace(":", "")
    if len(digits) != 64 or any(c not in string.hexdigits for c in digits):
        raise ValueError(
            "a certificate fingerprint is its SHA-256 in hex: 64 digits, colons between pairs "
            "allowed, `sha256:` in front allowed, as `rtemu serve --tls-dir` prints it"
        )
    return bytes.fromhex(digits)


def show(fingerprint: bytes) -> str:
    """``fingerprint`` as ``rtemu serve`` prints it (upper-case pairs joined by colons)."""
    return ":".join(f"{b:02X}" for b in fingerprint)


def pinned_context(fingerprint: bytes) -> ssl.SSLContext:
    """A TLS 1.3 client context that accepts exactly the certificate of ``fingerprint``.

    The certificate is self-signed, so no chain or name is checked; instead the handshake
    fails unless the SHA-256 of the certificate the server showed is ``fingerprint``. The
    check is part of the handshake, so nothing (no token) is sent to any other server.
    """

    class PinnedSocket(ssl.SSLSocket):
        def do_handshake(self, block: bool = False) -> None:
            super().do_handshake(block)
            der = self.getpeercert(binary_form=True)
            shown = hashlib.sha256(der).digest() if der else b""
            if not hmac.compare_digest(shown, fingerprint):
                raise PinMismatch(
                    f"the server's certificate has fingerprint {show(shown) or 'none'}, not "
                    f"the pinned {show(fingerprint)}: it is not the server the fingerprint "
                    "names (nothing was sent to it)"
                )

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.sslsocket_class = PinnedSocket
    return context


def mismatch(error: BaseException) -> PinMismatch | None:
    """The :class:`PinMismatch` behind ``error`` (httpx wraps it twice), if any."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, PinMismatch):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None
