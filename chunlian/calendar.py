"""The coming Spring Festival: its date, 干支 and 生肖, from lunar-python's calendar; and which
zodiac animal a couplet may name as its year."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import resources

from lunar_python import Lunar, Solar

MIN_YEAR, MAX_YEAR = 1901, 2099
ANIMALS = "鼠牛虎兔龙蛇马羊猴鸡狗猪"
ALIASES = {"犬": "狗"}  # the names a 春联 writes as often as the plain ones (玉犬迎春 is a 狗 year's)
ANIMAL_CHARS = ANIMALS + "".join(ALIASES)
FAREWELL, WELCOME, YEAR_WORDS = set("辞送别"), set("迎接"), set("年岁")
HERALDS = WELCOME | set("报贺")  # an animal that welcomes or brings the spring (金羊迎春, 灵蛇报喜) is the year's own


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


def previous_animal(zodiac: str) -> str:
    return ANIMALS[(ANIMALS.index(zodiac) - 1) % 12]


def animal_names(animal: str) -> str:
    """Every character that names ``animal``: 狗 and 犬."""
    return animal + "".join(k for k, v in ALIASES.items() if v == animal)


def _lines(name: str) -> list[str]:
    text = resources.files("chunlian").joinpath("data", name).read_text(encoding="utf-8")
    return [ln for ln in text.splitlines() if ln and not ln.startswith("#")]


@lru_cache(maxsize=1)
def zodiac_idioms() -> tuple[str, ...]:
    return tuple(_lines("zodiac_idioms.txt"))


@lru_cache(maxsize=1)
def zodiac_imagery() -> dict[str, tuple[str, ...]]:
    return {a: tuple(words.split()) for a, _, words in (ln.partition("\t") for ln in _lines("zodiac_imagery.tsv"))}


def _in_idiom(line: str, i: int) -> bool:
    """The character at ``i`` lies inside one of the idioms (not merely near one: 龙 beside 鼠标 is still 龙)."""
    for idiom in zodiac_idioms():
        start = line.find(idiom, max(0, i - len(idiom) + 1))
        if 0 <= start <= i:
            return True
    return False


def wrong_year(line: str, zodiac: str) -> list[str]:
    """Zodiac animals that name the wrong year, as 'animal (why)'.

    An animal after 辞/送/别 is the year being seen off (the previous one); after 迎/接, before
    年/岁, or welcoming the spring (迎/接/报/贺 after it: 金羊迎春) it is the year's own; any other animal
    outside an idiom (龙腾虎跃, 金鸡报晓) must be one of the two. Empty when the line is right for the year of ``zodiac``.
    """
    prev = previous_animal(zodiac)
    out = []
    for i, ch in enumerate(line):
        if ch not in ANIMAL_CHARS or _in_idiom(line, i):
            continue
        before = line[i - 1] if i else ""
        after = line[i + 1] if i + 1 < len(line) else ""
        if before in FAREWELL:
            want = (prev,)
        elif before in WELCOME or after in YEAR_WORDS or after in HERALDS:
            want = (zodiac,)
        else:
            want = (zodiac, prev)
        if ALIASES.get(ch, ch) not in want:
            out.append(f"{ch}（{zodiac}年应作{'或'.join(want)}）")
    return out
