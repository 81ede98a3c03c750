"""Dates: absolute dates at the precision they were stated, and relative time phrases resolved to them.

Absolute dates ("1:56 pm on 8 May, 2023", "2023/05/20 (Sat) 02:21", "May 2023", "2023-05", "2023") are
read by python-dateutil; this module only adds what it does not do: the precision a date was stated at
(a year, a month, a day) and relative phrases, kept at their own precision: "last year" said on 8 May
2023 becomes ``2022``, "two months ago" ``2023-03`` and "two weeks ago" ``2023-04-24``.

Date arithmetic never raises: a phrase that would name a day outside years 1-9999 ("99999999 days ago",
"tomorrow" said on 31 December 9999) resolves to nothing, and ``out_of_range_phrases`` names such phrases so an
ingest can record that it dropped them.
"""

from __future__ import annotations

import calendar
import re
from datetime import date, datetime
from typing import Any, NamedTuple

from dateutil import parser as _dateutil

from logicmap.memory.records.records import DatePrecision

__all__ = [
    "MONTHS",
    "PartialDate",
    "date_text",
    "find_time_phrases",
    "out_of_range_phrases",
    "parse_date",
    "parse_timestamp",
    "resolve_relative",
    "time_phrase_spans",
]

# Word lists here: the English calendar and time vocabulary (months, weekdays, units, deictic words).
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
"""The month names, January first: the one month table (regexes over month names derive from it)."""

_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "a couple of": 2,
    "a few": 3,
    "few": 3,
    "couple of": 2,
    "several": 3,
}
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_NUM = (
    r"(\d+|a couple of|couple of|a few|few|several|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
)
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
# Longer texts are not a date (a session stamp or a stated date is short); dateutil never sees a whole turn.
_MAX_DATE_TEXT = 100
# More digits than this count more days than years 1-9999 hold (3,652,059): out of range whatever the anchor.
_MAX_COUNT_DIGITS = 7
_ISO_PARTIAL = re.compile(r"(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?")  # YYYY, YYYY-MM, YYYY-MM-DD
_PADDED_YEAR = re.compile(r"(?<!\d)00\d\d(?!\d)")  # "0001" .. "0099"
# Two defaults that differ in every field: a field dateutil fills from the default was not stated.
_DEFAULTS = (datetime(1, 1, 1), datetime(2, 2, 2))


class PartialDate(NamedTuple):
    """An absolute date as precise as it was stated: its first moment and ``year``, ``month`` or ``day``."""

    start: datetime
    precision: DatePrecision

    @property
    def end(self) -> datetime:
        """The first moment after the stated period (exclusive end); ``datetime.max`` when that is past 9999."""
        year, month = self.start.year, self.start.month
        if self.precision == "year":
            year, month = year + 1, 1
        elif self.precision == "month":
            year, month = year + (month == 12), month % 12 + 1
        else:
            following = _from_ordinal(self.start.toordinal() + 1)
            return datetime.max if following is None else datetime(following.year, following.month, following.day)
        return datetime.max if year > date.max.year else datetime(year, month, 1)

    @property
    def last_day(self) -> date:
        """The last day of the stated period."""
        year, month = self.start.year, self.start.month
        if self.precision == "year":
            return date(year, 12, 31)
        if self.precision == "month":
            return date(year, month, calendar.monthrange(year, month)[1])
        return self.start.date()

    def iso(self) -> str:
        """``YYYY``, ``YYYY-MM`` or ``YYYY-MM-DD``: the date at its precision."""
        start, precision = self.start, self.precision
        return _iso(start.year, start.month if precision != "year" else None, start.day if precision == "day" else None)


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
    text = str(value).strip()
    if len(text) > _MAX_DATE_TEXT:
        return None
    text = _WEEKDAY_NOTE.sub(" ", re.sub(r"\s+", " ", text))
    iso = _ISO_PARTIAL.fullmatch(text)
    if iso:  # read here: dateutil takes "0001-01" for January of its default year
        year_text, month_text, day_text = iso.groups()
        month, day = (int(g) if g else None for g in (month_text, day_text))
        try:
            start = datetime(int(year_text), month or 1, day or 1)
        except ValueError:
            return None
        return PartialDate(start, "day" if day else "month" if month else "year")
    if not re.search(r"\d{4}", text):  # every absolute date states its year
        return None
    try:
        first, second = (_dateutil.parse(text, default=d).replace(tzinfo=None) for d in _DEFAULTS)
        # dateutil reads "1 January, 0001" as 2001: a year written with four digits is that year.
        padded = _PADDED_YEAR.findall(text)
        if len(padded) == 1 and first.year != int(padded[0]) and first.year % 100 == int(padded[0]):
            first, second = first.replace(year=int(padded[0])), second.replace(year=int(padded[0]))
    except (ValueError, ArithmeticError):  # dateutil raises decimal.InvalidOperation on a 30-digit number
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


def time_phrase_spans(text: str) -> list[tuple[str, int, int]]:
    """``find_time_phrases`` with where each phrase starts and ends in ``text``."""
    return [(m.group(0), m.start(), m.end()) for m in _PHRASE_RE.finditer(text or "")]


class _OutOfRange:
    """A relative phrase whose date falls outside years 1-9999 at its anchor."""


_OUT_OF_RANGE = _OutOfRange()


def _iso(year: int, month: int | None = None, day: int | None = None) -> str:
    return f"{year:04d}" + (f"-{month:02d}" if month else "") + (f"-{day:02d}" if day else "")


def _from_ordinal(ordinal: int) -> date | None:
    return date.fromordinal(ordinal) if 1 <= ordinal <= date.max.toordinal() else None


def _count(token: str) -> int | None:
    """The number a count word or numeral says; ``None`` for a numeral too long to name a representable date."""
    token = token.lower().strip()
    if token.isdigit():
        return int(token) if len(token) <= _MAX_COUNT_DIGITS else None
    return _NUMBERS.get(token, 1)


def _shift_days(day: date, days: int | None) -> str | _OutOfRange:
    shifted = _from_ordinal(day.toordinal() + days) if days is not None else None
    return shifted.isoformat() if shifted is not None else _OUT_OF_RANGE


def _shift_months(day: date, months: int | None) -> str | _OutOfRange:
    if months is None:
        return _OUT_OF_RANGE
    year, month = divmod(day.year * 12 + (day.month - 1) + months, 12)
    return _iso(year, month + 1) if date.min.year <= year <= date.max.year else _OUT_OF_RANGE


def _shift_years(day: date, years: int | None) -> str | _OutOfRange:
    year = day.year + years if years is not None else 0
    return _iso(year) if date.min.year <= year <= date.max.year else _OUT_OF_RANGE


def _times(sign: int, n: int | None, factor: int = 1) -> int | None:
    return None if n is None else sign * n * factor


def _resolve(phrase: str, anchor: datetime | date | None) -> str | _OutOfRange | None:
    """``resolve_relative``'s answer, with a phrase whose date is not representable told apart from an unknown one."""
    if not phrase:
        return None
    # A phrase of the relative forms is no absolute date: dateutil (the slow part) is not asked.
    absolute = None if _PHRASE_RE.fullmatch(phrase.strip()) else parse_date(phrase)
    if absolute is not None:
        return absolute.iso()
    if anchor is None:
        return None
    today = anchor.date() if isinstance(anchor, datetime) else anchor
    p = phrase.lower().strip()
    if p in ("today", "tonight", "this morning", "this afternoon", "this evening"):
        return today.isoformat()
    shift = {"yesterday": -1, "the day before yesterday": -2, "tomorrow": 1}.get(p)
    if shift is not None:
        return _shift_days(today, shift)
    match = re.fullmatch(rf"{_NUM}\s+{_UNIT}\s+ago", p)
    sign = -1
    if not match:
        match = re.fullmatch(rf"in\s+{_NUM}\s+{_UNIT}", p)
        sign = 1
    if match:
        n, unit = _count(match.group(1)), match.group(2)
        if unit == "day":
            return _shift_days(today, _times(sign, n))
        if unit in ("week", "weekend"):
            return _shift_days(today, _times(sign, n, 7))
        if unit == "month":
            return _shift_months(today, _times(sign, n))
        return _shift_years(today, _times(sign, n))
    match = re.fullmatch(r"(last|next|this|past)\s+(\w+)", p)
    if match:
        which, unit = match.groups()
        step = {"last": -1, "past": -1, "next": 1, "this": 0}[which]
        if unit in ("week", "weekend"):
            return _shift_days(today, 7 * step)
        if unit == "month":
            return _shift_months(today, step)
        if unit == "year":
            return _shift_years(today, step)
        if unit in ("summer", "winter", "spring", "fall", "autumn"):
            return _shift_years(today, min(step, 0))
        if unit in _WEEKDAYS:
            target = _WEEKDAYS.index(unit)
            delta = today.weekday() - target
            if step < 0:
                return _shift_days(today, -(delta if delta > 0 else delta + 7))
            if step > 0:
                ahead = target - today.weekday()
                return _shift_days(today, ahead if ahead > 0 else ahead + 7)
            return _shift_days(today, -delta)
    return None


def resolve_relative(phrase: str, anchor: datetime | date | None) -> str | None:
    """The absolute date (``YYYY-MM-DD``, ``YYYY-MM`` or ``YYYY``) a relative phrase means at ``anchor``.

    Absolute dates ("8 May 2023", "May 2023") are returned at their own precision; unknown phrases give ``None``,
    and so do phrases whose date falls outside years 1-9999 (``out_of_range_phrases`` names those).
    """
    resolved = _resolve(phrase, anchor)
    return resolved if isinstance(resolved, str) else None


def out_of_range_phrases(text: str, anchor: datetime | date | None) -> list[str]:
    """The relative time phrases of ``text`` that name no date in years 1-9999 at ``anchor`` (dropped, not
    saturated: "in 99999 years" is no claim about 9999)."""
    return [p for p in find_time_phrases(text) if isinstance(_resolve(p, anchor), _OutOfRange)]


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
        try:
            moment = date(parts[0], parts[1] if len(parts) > 1 else 1, parts[2] if len(parts) > 2 else 1)
        except ValueError:
            return str(moment)  # "0000" or "2023-13": not a calendar date, said as it was given
    if precision == "year":
        return str(moment.year)
    month = f"{MONTHS[moment.month - 1]} {moment.year}"
    return month if precision == "month" else f"{moment.day} {month}"
