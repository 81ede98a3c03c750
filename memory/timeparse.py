"""Session timestamps and relative time phrases resolved to absolute dates.

"last year" said on 8 May 2023 becomes ``2022``; "two weeks ago" becomes ``2023-04-24``.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

__all__ = ["date_text", "find_time_phrases", "parse_timestamp", "resolve_relative"]

_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "a few": 3,
    "few": 3, "couple of": 2, "several": 3,
}
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september",
           "october", "november", "december"]
_NUM = r"(\d+|a couple of|couple of|a few|few|several|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_UNIT = r"(day|week|month|year|weekend)s?"

_PATTERNS = [
    rf"\b{_NUM}\s+{_UNIT}\s+ago\b",
    rf"\bin\s+{_NUM}\s+{_UNIT}\b",
    r"\b(last|next|this|past)\s+(week|weekend|month|year|summer|winter|spring|fall|autumn)\b",
    r"\b(last|next|this)\s+(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b",
    r"\b(yesterday|today|tonight|tomorrow|this morning|this afternoon|this evening)\b",
    r"\b(the day before yesterday|the other day|recently|a while ago)\b",
]
_PHRASE_RE = re.compile("|".join(f"(?:{p})" for p in _PATTERNS), re.IGNORECASE)

_TIMESTAMP_FORMATS = [
    "%I:%M %p on %d %B, %Y",  # LoCoMo: 1:56 pm on 8 May, 2023
    "%I:%M %p on %d %b, %Y",
    "%Y/%m/%d (%a) %H:%M",  # LongMemEval: 2023/05/20 (Sat) 02:21
    "%Y/%m/%d %H:%M",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%dT%H:%M:%S",
    "%Y-%m-%d %H:%M",
    "%Y-%m-%d",
    "%d %B %Y",
    "%d %B, %Y",
    "%B %d, %Y",
]


def parse_timestamp(text: str | None) -> datetime | None:
    """Parse a session timestamp in the LoCoMo, LongMemEval or ISO forms; ``None`` if it is none of them."""
    if not text or not isinstance(text, str):
        return None
    cleaned = re.sub(r"\s+", " ", text.strip())
    try:
        return datetime.fromisoformat(cleaned.replace("Z", "+00:00")).replace(tzinfo=None)
    except ValueError:
        pass
    for fmt in _TIMESTAMP_FORMATS:
        try:
            return datetime.strptime(cleaned, fmt)
        except ValueError:
            continue
    return None


def find_time_phrases(text: str) -> list[str]:
    """Relative time phrases in a text, in order of appearance."""
    return [m.group(0) for m in _PHRASE_RE.finditer(text or "")]


def _count(token: str) -> int:
    token = token.lower().strip()
    return int(token) if token.isdigit() else _NUMBERS.get(token, 1)


def _shift_months(day: date, months: int) -> date:
    month_index = day.year * 12 + (day.month - 1) + months
    year, month = divmod(month_index, 12)
    return date(year, month + 1, 1)


def resolve_relative(phrase: str, anchor: datetime | date | None) -> str | None:
    """The absolute date (``YYYY-MM-DD``, ``YYYY-MM`` or ``YYYY``) a relative phrase means at ``anchor``.

    Absolute dates inside the phrase ("8 May 2023") are returned as they are; unknown phrases give ``None``.
    """
    if not phrase:
        return None
    absolute = parse_timestamp(phrase)
    if absolute is not None:
        return absolute.date().isoformat()
    if anchor is None:
        return None
    today = anchor.date() if isinstance(anchor, datetime) else anchor
    p = phrase.lower().strip()
    if p in ("today", "tonight", "this morning", "this afternoon", "this evening"):
        return today.isoformat()
    if p == "yesterday":
        return (today - timedelta(days=1)).isoformat()
    if p == "the day before yesterday":
        return (today - timedelta(days=2)).isoformat()
    if p == "tomorrow":
        return (today + timedelta(days=1)).isoformat()
    match = re.fullmatch(rf"{_NUM}\s+{_UNIT}\s+ago", p)
    sign = -1
    if not match:
        match = re.fullmatch(rf"in\s+{_NUM}\s+{_UNIT}", p)
        sign = 1
    if match:
        n, unit = _count(match.group(1)), match.group(2)
        if unit == "day":
            return (today + sign * timedelta(days=n)).isoformat()
        if unit in ("week", "weekend"):
            return (today + sign * timedelta(weeks=n)).isoformat()
        if unit == "month":
            return _shift_months(today, sign * n).strftime("%Y-%m")
        return str(today.year + sign * n)
    match = re.fullmatch(r"(last|next|this|past)\s+(\w+)", p)
    if match:
        which, unit = match.groups()
        step = {"last": -1, "past": -1, "next": 1, "this": 0}[which]
        if unit in ("week", "weekend"):
            return (today + timedelta(weeks=step)).isoformat()
        if unit == "month":
            return _shift_months(today, step).strftime("%Y-%m")
        if unit == "year":
            return str(today.year + step)
        if unit in ("summer", "winter", "spring", "fall", "autumn"):
            return str(today.year + min(step, 0)) if step else str(today.year)
        if unit in _WEEKDAYS:
            target = _WEEKDAYS.index(unit)
            delta = today.weekday() - target
            if step < 0:
                return (today - timedelta(days=delta if delta > 0 else delta + 7)).isoformat()
            if step > 0:
                ahead = target - today.weekday()
                return (today + timedelta(days=ahead if ahead > 0 else ahead + 7)).isoformat()
            return (today - timedelta(days=delta)).isoformat()
    return None


def date_text(moment: date | datetime | str, precision: str = "day") -> str:
    """``24 April 2023``, ``April 2023`` or ``2023``: a date as an answer says it, no more precise than known.

    A string is ``YYYY-MM-DD``, ``YYYY-MM`` or ``YYYY`` (what ``resolve_relative`` returns) and carries its
    own precision.
    """
    if isinstance(moment, str):
        if not re.fullmatch(r"\d{4}(-\d{2}(-\d{2})?)?", moment.strip()):
            return moment  # not a date this function can read: said as it was given
        parts = [int(p) for p in moment.strip().split("-")]
        precision = ("year", "month", "day")[len(parts) - 1]
        moment = date(parts[0], parts[1] if len(parts) > 1 else 1, parts[2] if len(parts) > 2 else 1)
    if precision == "year":
        return str(moment.year)
    month = f"{_MONTHS[moment.month - 1].capitalize()} {moment.year}"
    return month if precision == "month" else f"{moment.day} {month}"
