"""Dates: absolute dates at the precision they were stated, and relative time phrases resolved to them.

Absolute dates ("1:56 pm on 8 May, 2023", "2023/05/20 (Sat) 02:21", "May 2023", "2023-05", "2023") are
read by python-dateutil; this module only adds what it does not do: the precision a date was stated at
(a year, a month, a day) and relative phrases, kept at their own precision: "last year" said on 8 May
2023 becomes ``2022``, "two months ago" ``2023-03`` and "two weeks ago" ``2023-04-24``.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from typing import Any, NamedTuple

from dateutil import parser as _dateutil

from logicmap.memory.records import DatePrecision

__all__ = [
    "MONTHS",
    "PartialDate",
    "date_text",
    "find_time_phrases",
    "parse_date",
    "parse_timestamp",
    "resolve_relative",
]

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
"""The month names, January first: the one month table (regexes over month names derive from it)."""

_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "a few": 3,
    "few": 3, "couple of": 2, "several": 3,
}
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
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

_WEEKDAY_NOTE = re.compile(r"\((?:mon|tue|wed|thu|fri|sat|sun)[a-z]*\.?\)", re.IGNORECASE)  # LongMemEval's "(Sat)"
# Two defaults that differ in every field: a field dateutil fills from the default was not stated.
_DEFAULTS = (datetime(1, 1, 1), datetime(2, 2, 2))


class PartialDate(NamedTuple):
    """An absolute date as precise as it was stated: its first moment and ``year``, ``month`` or ``day``."""

    start: datetime
    precision: DatePrecision

    @property
    def end(self) -> datetime:
        """The first moment after the stated period (exclusive end)."""
        if self.precision == "year":
            return datetime(self.start.year + 1, 1, 1)
        if self.precision == "month":
            return datetime(self.start.year + (self.start.month == 12), self.start.month % 12 + 1, 1)
        return datetime(self.start.year, self.start.month, self.start.day) + timedelta(days=1)

    @property
    def last_day(self) -> date:
        """The last day of the stated period."""
        return (self.end - timedelta(days=1)).date()

    def iso(self) -> str:
        """``YYYY``, ``YYYY-MM`` or ``YYYY-MM-DD``: the date at its precision."""
        return self.start.strftime({"year": "%Y", "month": "%Y-%m", "day": "%Y-%m-%d"}[self.precision])


def parse_date(value: Any) -> PartialDate | None:
    """An absolute date with the precision it states: a datetime or date (a day), or a text such as
    ``2023``, ``2023-05``, ``May 2023``, ``8 May 2023`` or a session timestamp. ``None`` when it is not a
    date with a year (relative phrases are ``resolve_relative``'s)."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return PartialDate(value.replace(tzinfo=None), "day")
    if isinstance(value, date):
        return PartialDate(datetime(value.year, value.month, value.day), "day")
    text = _WEEKDAY_NOTE.sub(" ", re.sub(r"\s+", " ", str(value).strip()))
    if not re.search(r"\d{4}", text):  # every absolute date states its year
        return None
    try:
        first, second = (_dateutil.parse(text, default=d).replace(tzinfo=None) for d in _DEFAULTS)
    except (ValueError, OverflowError):
        return None
    if first.year != second.year:
        return None
    if first.month != second.month:
        return PartialDate(datetime(first.year, 1, 1), "year")
    if first.day != second.day:
        return PartialDate(datetime(first.year, first.month, 1), "month")
    return PartialDate(first, "day")


def parse_timestamp(text: str | None) -> datetime | None:
    """A session timestamp (LoCoMo, LongMemEval or ISO forms, any text that states a day); ``None`` otherwise."""
    if not text or not isinstance(text, str):
        return None
    parsed = parse_date(text)
    return parsed.start if parsed is not None and parsed.precision == "day" else None


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

    Absolute dates ("8 May 2023", "May 2023") are returned at their own precision; unknown phrases give ``None``.
    """
    if not phrase:
        return None
    absolute = parse_date(phrase)
    if absolute is not None:
        return absolute.iso()
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
    month = f"{MONTHS[moment.month - 1]} {moment.year}"
    return month if precision == "month" else f"{moment.day} {month}"
