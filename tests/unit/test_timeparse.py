"""Relative time phrases resolved against the session timestamp."""

from __future__ import annotations

import pytest

from logicmap.memory.language.timeparse import find_time_phrases, parse_timestamp, resolve_relative

ANCHOR = parse_timestamp("6:40 pm on 8 May, 2023")


@pytest.mark.parametrize(
    ("phrase", "expected"),
    [
        ("yesterday", "2023-05-07"),
        ("last year", "2022"),
        ("two months ago", "2023-03"),
        ("3 weeks ago", "2023-04-17"),
        ("last Saturday", "2023-05-06"),
        ("next month", "2023-06"),
        ("two weeks ago", "2023-04-24"),
        ("8 May 2023", "2023-05-08"),
        ("the heat death of the universe", None),
    ],
)
def test_resolve_relative(phrase: str, expected: str | None) -> None:
    assert resolve_relative(phrase, ANCHOR) == expected


def test_timestamps_of_both_dataset_formats() -> None:
    assert parse_timestamp("1:56 pm on 8 May, 2023").isoformat() == "2023-05-08T13:56:00"
    assert parse_timestamp("2023/05/20 (Sat) 02:21").isoformat() == "2023-05-20T02:21:00"
    assert parse_timestamp("not a date") is None


def test_find_time_phrases_in_order() -> None:
    text = "I moved two weeks ago, and last year I lived in Porto; yesterday I ran."
    assert find_time_phrases(text) == ["two weeks ago", "last year", "yesterday"]


def test_date_text_says_a_date_at_its_precision() -> None:
    from datetime import date, datetime

    from logicmap.memory.language.timeparse import date_text

    assert (
        date_text("2023-05-07") == "7 May 2023" and date_text("2023-04") == "April 2023" and date_text("2023") == "2023"
    )
    assert date_text(datetime(2023, 4, 1), "month") == "April 2023" and date_text(date(2023, 2, 9)) == "9 February 2023"
    assert date_text("late April") == "late April"  # not a date it can read: left as given


def test_absolute_dates_keep_their_stated_precision() -> None:
    from datetime import date

    from logicmap.memory.language.timeparse import parse_date

    assert parse_date("May 2023").iso() == "2023-05" and parse_date("2023").iso() == "2023"
    assert parse_date("8 May, 2023").iso() == "2023-05-08" and parse_date("2023-5").precision == "month"
    assert parse_date("Feb 2024").last_day == date(2024, 2, 29) and parse_date("2023").last_day == date(2023, 12, 31)
    assert parse_date("May") is None and parse_date("last week") is None and parse_date("") is None
    assert resolve_relative("May 2023", ANCHOR) == "2023-05"
