"""An incremental parser for Server-Sent Events (the ``text/event-stream`` format).

The stream arrives in chunks cut anywhere, even inside a line ending or a UTF-8 character, so
the parser keeps bytes until a line is whole and decodes whole lines only.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    """One dispatched event: its type (``message`` when the stream names none) and its data."""

    event: str
    data: str
    id: str | None = None


class SSEParser:
    """Feed it chunks of a stream; it returns each event once its closing blank line arrived.

    It follows the HTML standard's rules: lines end with CRLF, LF or CR; a line starting with
    ``:`` is a comment; ``data`` lines of one event are joined with newlines; an event with no
    ``data`` line is not dispatched; a field with no colon has an empty value; one space after
    the colon is dropped.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None
        # A CR ended the last chunk's last line: an LF starting the next chunk belongs to it.
        self._after_cr = False
        self._first = True

    def feed(self, chunk: bytes) -> list[Event]:
        """Adds ``chunk`` to the stream; returns the events it completed, in order."""
        if self._after_cr and chunk[:1] == b"\n":
            chunk = chunk[1:]
        if chunk:
            self._after_cr = False
        self._buf += chunk
        events: list[Event] = []
        start = 0
        buf = self._buf
        while True:
            cr = buf.find(b"\r", start)
            lf = buf.find(b"\n", start)
            if cr < 0 and lf < 0:
                break
            if lf < 0 or (0 <= cr < lf):
                end, nxt = cr, cr + 1
                if nxt < len(buf):
                    if buf[nxt] == ord("\n"):
                        nxt += 1
                else:
                    self._after_cr = True
            else:
                end, nxt = lf, lf + 1
            event = self._line(bytes(buf[start:end]))
            if event is not None:
                events.append(event)
            start = nxt
        del buf[:start]
        return events

    def _line(self, raw: bytes) -> Event | None:
        line = raw.decode("utf-8", errors="replace")
        if self._first:
            self._first = False
            line = line.removeprefix("\ufeff")
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self._id = value
        return None

    def _dispatch(self) -> Event | None:
        data, event = self._data, self._event
        self._data, self._event = [], ""
        if not data:
            return None
        return Event(event or "message", "\n".join(data), self._id)
