import datetime as dt

import pytest

from chunlian.calendar import coming_year, spring_festival


@pytest.mark.parametrize(
    "year,ganzhi,zodiac,date",
    [(2025, "乙巳", "蛇", "2025-01-29"), (2026, "丙午", "马", "2026-02-17"), (2027, "丁未", "羊", "2027-02-06")],
)
def test_spring_festival_dates_and_names(year, ganzhi, zodiac, date):
    y = spring_festival(year)
    assert (y.ganzhi, y.zodiac, y.spring_festival) == (ganzhi, zodiac, date)


def test_coming_festival_is_this_years_until_it_passes():
    assert coming_year(dt.date(2026, 11, 29)).label == "丁未羊年"
    assert coming_year(dt.date(2026, 2, 17)).ganzhi == "丙午"
    assert coming_year(dt.date(2026, 2, 18)).ganzhi == "丁未"
    assert coming_year(dt.date(2025, 1, 1)).zodiac == "蛇"


def test_out_of_range_year_is_refused():
    with pytest.raises(ValueError):
        spring_festival(1800)
