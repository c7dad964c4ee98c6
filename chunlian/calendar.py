"""The coming Spring Festival: its date, 干支 and 生肖, from lunar-python's calendar."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from functools import lru_cache

from lunar_python import Lunar, Solar

MIN_YEAR, MAX_YEAR = 1901, 2099


@dataclass(frozen=True)
class Year:
    year: int  # Gregorian year in which this Spring Festival falls
    ganzhi: str
    zodiac: str
    spring_festival: str  # ISO date

    @property
    def label(self) -> str:
        return f"{self.ganzhi}{self.zodiac}年"

    def to_dict(self) -> dict:
        return asdict(self) | {"label": self.label}


@lru_cache(maxsize=256)
def spring_festival(year: int) -> Year:
    """The Spring Festival (正月初一) that falls in Gregorian ``year``."""
    if not MIN_YEAR <= year <= MAX_YEAR:
        raise ValueError(f"year must be between {MIN_YEAR} and {MAX_YEAR}")
    lunar = Lunar.fromYmd(year, 1, 1)
    solar = lunar.getSolar()
    date = dt.date(solar.getYear(), solar.getMonth(), solar.getDay())
    return Year(year, lunar.getYearInGanZhi(), lunar.getYearShengXiao(), date.isoformat())


def coming_year(today: dt.date | None = None) -> Year:
    """The Spring Festival on or after ``today``: couplets are written for the festival ahead."""
    return _coming(today or dt.date.today())


@lru_cache(maxsize=64)
def _coming(today: dt.date) -> Year:
    this = spring_festival(today.year)
    if dt.date.fromisoformat(this.spring_festival) >= today:
        return this
    return spring_festival(today.year + 1)


def lunar_today(today: dt.date | None = None) -> str:
    today = today or dt.date.today()
    return Solar.fromYmd(today.year, today.month, today.day).getLunar().toString()
