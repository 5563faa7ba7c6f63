"""Go ``time.Duration`` strings: parse them and write them the way Go does.

nagare's API carries durations as Go duration strings (media ``duration``, RIST ``bufferSize``,
the process configuration's waiting periods; docs/behaviour.md §1.8, §1.9, §1.12). Go decodes them
into nanoseconds and re-encodes them canonically, so ``3m`` comes back as ``3m0s`` in the helper
payload (§1.11). This module implements both directions over integer nanoseconds:

* ``parse_go_duration("1m30s") == 90_000_000_000``; raises ``ValueError`` with the reason.
* ``format_go_duration(90_000_000_000) == "1m30s"``.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Final

NANOSECOND: Final = 1
MICROSECOND: Final = 1_000
MILLISECOND: Final = 1_000_000
SECOND: Final = 1_000_000_000
MINUTE: Final = 60 * SECOND
HOUR: Final = 60 * MINUTE

_UNITS: Final = {
    "ns": NANOSECOND,
    "us": MICROSECOND,
    "\u00b5s": MICROSECOND,  # micro sign
    "\u03bcs": MICROSECOND,  # Greek small letter mu
    "ms": MILLISECOND,
    "s": SECOND,
    "m": MINUTE,
    "h": HOUR,
}
_MAX: Final = 2**63 - 1

GO_DURATION_PATTERN: Final = (
    r"^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(" + "|".join(_UNITS) + r"))+)$"
)
"""The syntax ``parse_go_duration`` accepts, as an RE2/ECMA regular expression for CRD schemas."""

# One component: digits, optional fraction, then a unit made of anything but digits and dots.
_COMPONENT = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]*)")


def parse_go_duration(text: str) -> int:
    """Nanoseconds denoted by the Go duration ``text`` (``"1h2m3.5s"``, ``"-300ms"``, ``"0"``).

    Follows Go's ``time.ParseDuration``: a sign, then one or more ``<number><unit>`` components
    with units ns, us/µs, ms, s, m, h; ``"0"`` needs no unit. Raises ``ValueError`` for empty
    input, a missing or unknown unit, a component without digits, or a value beyond ±2^63-1 ns.
    """
    body = text
    negative = False
    if body[:1] in ("-", "+"):
        negative = body[0] == "-"
        body = body[1:]
    if body == "0":
        return 0
    if not body:
        raise ValueError(f"invalid duration {text!r}: empty")
    total = 0
    position = 0
    while position < len(body):
        match = _COMPONENT.match(body, position)
        assert match is not None  # the pattern can match the empty string
        whole, fraction, unit = match.group(1), match.group(2), match.group(3)
        if not whole and not fraction:
            raise ValueError(f"invalid duration {text!r}: expected a number at {body[position:]!r}")
        if not unit:
            raise ValueError(f"invalid duration {text!r}: missing unit")
        if unit not in _UNITS:
            raise ValueError(f"invalid duration {text!r}: unknown unit {unit!r}")
        scale = _UNITS[unit]
        total += int(whole or "0") * scale
        if fraction:
            total += int(fraction) * scale // 10 ** len(fraction)
        if total > _MAX + (1 if negative else 0):
            raise ValueError(f"invalid duration {text!r}: out of range")
        position = match.end()
    return -total if negative else total


def _with_fraction(value: int, digits: int) -> str:
    """``value / 10**digits`` in decimal, without trailing zeros in the fraction."""
    whole, fraction = divmod(value, 10**digits)
    text = str(whole)
    if fraction:
        text += "." + str(fraction).rjust(digits, "0").rstrip("0")
    return text


def format_go_duration(nanoseconds: int) -> str:
    """``nanoseconds`` as Go's ``Duration.String`` writes it: ``0s``, ``1.5µs``, ``1h0m0s``."""
    sign = "-" if nanoseconds < 0 else ""
    size = abs(nanoseconds)
    if size == 0:
        return "0s"
    if size < MICROSECOND:
        return f"{sign}{size}ns"
    if size < MILLISECOND:
        return f"{sign}{_with_fraction(size, 3)}\u00b5s"
    if size < SECOND:
        return f"{sign}{_with_fraction(size, 6)}ms"
    text = _with_fraction(size % MINUTE, 9) + "s"
    if size >= MINUTE:
        text = f"{(size // MINUTE) % 60}m" + text
    if size >= HOUR:
        text = f"{size // HOUR}h" + text
    return sign + text


def to_timedelta(text: str) -> timedelta:
    """The Go duration string ``text`` as a ``timedelta`` (sub-microsecond parts dropped)."""
    nanoseconds = parse_go_duration(text)
    microseconds = abs(nanoseconds) // MICROSECOND
    return timedelta(microseconds=-microseconds if nanoseconds < 0 else microseconds)
