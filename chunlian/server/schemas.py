"""What the API takes and gives: the request and answer models, one pattern per text field.

The patterns are what pydantic enforces and what ``/openapi.json`` shows, so a request the schema calls valid is
refused only for what no schema can say (``errors.WELL_FORMED_REFUSALS``). Each answer model is exact: no field
beyond those listed (schemathesis checks the server against them)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    model_validator,
)

from chunlian import calendar
from chunlian.decoding import inputs, together
from chunlian.engine import MAX_COUNT
from chunlian.errors import CoupletError

Layout = Literal["traditional", "modern"]
LAYOUT_DOC = (
    "how the couplet hangs: traditional (default) puts 上联 on the right post and writes the 横批 right to left, "
    "as read facing the door; modern puts 上联 on the left and writes the 横批 left to right"
)
Detail = Literal["compact", "full"]
DETAIL_DOC = (
    "how much of each couplet the answer carries: compact (default) gives the lines, 横批, tones, hard_ok and "
    "score; full adds the rule report (checks) and lm_score"
)


# What the API accepts, one pattern per text field: pydantic enforces it and /openapi.json shows it, so a
# request the schema calls valid is refused only for what no schema can say (WELL_FORMED_REFUSALS).
HAN = "\u4e00-\u9fff"  # the basic CJK block, traditional forms included: every model character lies in it
_WS = r" \t\n\r\u3000"  # may surround the text; dropped
_PUNCT = "，；、,;"  # between two clauses (ASCII , ; are read as ，；)
_STOP = "。.!！?？"  # may end a line; dropped
KEYWORD_PATTERN = rf"^[{_WS}]*[{HAN}]{{1,{inputs.MAX_KEYWORD_CHARS}}}[{_WS}]*$"
LINE_PATTERN = rf"^[{_WS}]*[{HAN}](?:[{_PUNCT}]?[{HAN}]){{{inputs.MIN_LINE - 1},{inputs.MAX_LINE - 1}}}[{_WS}{_STOP}]*$"
HORIZONTAL_PATTERN = rf"^[{_WS}]*[{HAN}]{{2,6}}[{_WS}]*$"
LINE_DOC = (
    f"{inputs.MIN_LINE}–{inputs.MAX_LINE} Chinese characters, clauses separated by ，；、 (or , ;), "
    "optionally ending in 。！？"
)
Keyword = Annotated[str, StringConstraints(pattern=KEYWORD_PATTERN, max_length=16)]
Line = Annotated[str, StringConstraints(pattern=LINE_PATTERN, max_length=inputs.MAX_LINE)]
# JSON Schema counts 7.0 as an integer, and so do the (otherwise strict) request models; "7" and true are not
Integral = BeforeValidator(lambda v: int(v) if isinstance(v, float) and v.is_integer() else v)


class Health(BaseModel):
    ok: bool
    error: str | None = Field(None, description="why the model failed to load, or the batch worker stopped (500)")


class Ready(BaseModel):
    ready: bool


class _Asked(BaseModel):
    """What every request for couplets (write, match, fill) also says: how many, which seed, tones, script, year,
    and the shape of the answer."""

    count: Annotated[int, Integral] = Field(3, ge=1, le=MAX_COUNT)
    seed: Annotated[int | None, Integral] = Field(None, ge=0, le=2**31 - 1)
    tones: Literal["xin", "pingshui"] = "xin"
    script: Literal["simplified", "traditional"] = "simplified"
    year: Annotated[int | None, Integral] = Field(None, ge=calendar.MIN_YEAR, le=calendar.MAX_YEAR)
    layout: Layout = Field("traditional", description=LAYOUT_DOC + " (echoed in the answer for the page and PNG)")
    detail: Detail = Field("compact", description=DETAIL_DOC)


class Shown(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")
    upper: Line
    lower: Line


class CoupletRequest(_Asked):
    """Exactly one of ``keywords`` (write) or ``upper`` (对对子)."""

    model_config = ConfigDict(
        strict=True,
        json_schema_extra={
            "oneOf": [{"required": ["keywords"]}, {"required": ["upper"]}],
            "examples": [{"keywords": ["如意", "飞跃"], "count": 1}, {"upper": "春回大地千山秀", "count": 1}],
        },
    )
    keywords: list[Keyword] = Field(
        None,
        min_length=1,
        max_length=inputs.MAX_KEYWORDS,
        description=f"1–{inputs.MAX_KEYWORDS} wish words of 1–{inputs.MAX_KEYWORD_CHARS} characters, "
        "no word given twice (a character two words share, 大吉 大利, is written where both lines repeat in step)",
        json_schema_extra=lambda s: s.pop("default", None),
    )
    upper: Line = Field(
        None,
        description=f"an upper line to match (对对子): {LINE_DOC}",
        json_schema_extra=lambda s: s.pop("default", None),
    )
    length: Annotated[Literal[5, 7, 9, 11], Integral] = 7
    placement: Literal["embed", "acrostic", "theme"] = Field(
        "embed",
        description="embed: every wish word in the couplet; acrostic (藏头): their characters head the lines; "
        "theme: the couplet speaks of the words' theme (咖啡: 香, 杯) without having to hold them",
    )
    # named apart from BaseModel.register (a pydantic method); the API field is still ``register``
    line_register: Literal["auto", "spring", "general"] = Field(
        "auto",
        alias="register",
        description="for ``upper``: answer as a 春联 (spring), in the line's own register (general), or spring "
        "only when the line speaks of spring (auto)",
    )

    avoid: Shown | None = Field(
        None,
        description="the couplet shown (换一副): the first of the new ones differs from it in at least half its "
        "characters; without it, a request with a seed differs so from the deterministic couplet, which the server "
        "writes beside it unless it (or, through a shared Redis cache, another replica) showed it first",
    )

    @model_validator(mode="after")
    def _one_input(self):
        if (self.keywords is None) == (self.upper is None):
            raise CoupletError("one_input", "请给出吉祥词或上联（二选一）", "give either keywords or upper, not both")
        return self


class CheckRequest(BaseModel):
    model_config = ConfigDict(
        strict=True, json_schema_extra={"examples": [{"upper": "天增岁月人增寿", "lower": "春满乾坤福满门"}]}
    )
    upper: Line = Field(..., description=LINE_DOC)
    lower: Line = Field(..., description=LINE_DOC)
    tones: Literal["xin", "pingshui"] = "xin"


# -- writing together: fill the open places, other characters for one place, another 横批 ----------------------

BLANKS = "_＿□○*＊"  # an open place of a fill pattern (decoding.together.BLANKS)
PATTERN_LINE = (
    rf"^[{_WS}]*[{HAN}{BLANKS}](?:[{_PUNCT}]?[{HAN}{BLANKS}]){{{inputs.MIN_LINE - 1},{inputs.MAX_LINE - 1}}}"
    rf"[{_WS}{_STOP}]*$"
)
PATTERN_DOC = (
    f"the line with an _ (or ＿ □ ○ *) at each place to write and the characters to keep at theirs: {LINE_DOC}"
)
Pattern = Annotated[str, StringConstraints(pattern=PATTERN_LINE, max_length=inputs.MAX_LINE)]


class FillRequest(_Asked):
    """Keep some characters (a phrase, a whole line) and let chunlian write the places marked _."""

    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "upper": "春回大地千山秀",
                    "lower": "_______",
                    "avoid": {"upper": "春回大地千山秀", "lower": "福满人间万户欢"},
                },
                {"upper": "__如意___", "lower": "_______"},
            ]
        },
    )
    upper: Pattern = Field(..., description=PATTERN_DOC)
    lower: Pattern = Field(..., description=PATTERN_DOC + "; as long as upper, punctuation at the same places")
    avoid: Shown | None = Field(
        None, description="the couplet shown before: what is written differs from it (换下联 keeps the 上联)"
    )


class AlternativesRequest(BaseModel):
    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        json_schema_extra={
            "examples": [{"upper": "春回大地千山秀", "lower": "福满人间万户欢", "side": "lower", "index": 6}]
        },
    )
    upper: Line = Field(..., description=LINE_DOC)
    lower: Line = Field(..., description=LINE_DOC)
    side: Literal["upper", "lower"] = Field(..., description="the line of the character to change")
    index: Annotated[int, Integral] = Field(
        ..., ge=0, le=inputs.MAX_LINE - 1, description="its place in that line, from 0 (punctuation counts)"
    )
    count: Annotated[int, Integral] = Field(12, ge=1, le=together.MAX_ALTERNATIVES)
    tones: Literal["xin", "pingshui"] = "xin"
    script: Literal["simplified", "traditional"] = Field("simplified", description="of the characters answered")
    year: Annotated[int | None, Integral] = Field(None, ge=calendar.MIN_YEAR, le=calendar.MAX_YEAR)


class Alternative(BaseModel):
    model_config = ConfigDict(extra="forbid")
    char: str
    score: float = Field(description="the model's mean log-probability per character of the couplet with it")
    tone: str = Field(description="平, 仄 or 中 (either reading)")


class Current(BaseModel):
    model_config = ConfigDict(extra="forbid")
    char: str
    score: float


class AlternativesAnswer(BaseModel):
    """Other characters for one place, best first; each keeps every hard rule the couplet keeps."""

    model_config = ConfigDict(extra="forbid")
    side: Literal["upper", "lower"]
    index: int
    current: Current
    alternatives: list[Alternative] = Field(description="may be fewer than count, or none, where few fit")


class HorizontalRequest(BaseModel):
    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        json_schema_extra={"examples": [{"upper": "春回大地千山秀", "lower": "福满人间万户欢", "current": "万象更新"}]},
    )
    upper: Line = Field(..., description=LINE_DOC)
    lower: Line = Field(..., description=LINE_DOC)
    current: Annotated[str, StringConstraints(pattern=HORIZONTAL_PATTERN, max_length=16)] | None = Field(
        None, description="the 横批 shown now: the answer differs from it"
    )
    keywords: list[Keyword] | None = Field(None, max_length=inputs.MAX_KEYWORDS, description="wish words to echo")
    seed: Annotated[int, Integral] = Field(0, ge=0, le=2**31 - 1, description="another seed, another choice")
    script: Literal["simplified", "traditional"] = "simplified"
    year: Annotated[int | None, Integral] = Field(None, ge=calendar.MIN_YEAR, le=calendar.MAX_YEAR)


class HorizontalAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    horizontal: str = Field(description="横批, four characters")


# -- what POST /api/v1/couplets answers: one shape per ``detail``, each exact (no other field) ------------------


class Tones(BaseModel):
    model_config = ConfigDict(extra="forbid")
    upper: str = Field(description="平, 仄 or 中 (either reading) per character; punctuation as written")
    lower: str


class Rule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="equal_length, upper_ends_ze, no_repeat, rhythm_opposed, …")
    hard: bool = Field(description="a hard rule is never broken by a couplet chunlian writes")
    passed: bool
    message: str = Field(description="one line in Chinese")
    score: float = Field(description="for a soft rule, how well it is kept (0–1)")


class Checks(BaseModel):
    """The rule report of one couplet (``POST /api/v1/check`` answers it, with the lines, for a couplet a person
    wrote: ``CheckAnswer``)."""

    model_config = ConfigDict(extra="forbid")
    track: Literal["xin", "pingshui"]
    tones: Tones
    hard_ok: bool
    soft_score: float
    rules: list[Rule]


class _CheckedLines(BaseModel):
    model_config = ConfigDict(extra="forbid")
    upper: str = Field(
        description="the upper line as read: in simplified characters, spaces and a final stop dropped, , ; as ，；"
    )
    lower: str = Field(description="the lower line, read the same way")


class CheckAnswer(Checks, _CheckedLines):
    """What ``POST /api/v1/check`` answers: the two lines as read, then their rule report (no other field)."""


class CompactCouplet(BaseModel):
    model_config = ConfigDict(extra="forbid")
    upper: str
    lower: str
    horizontal: str = Field(description="横批")
    tones: Tones
    hard_ok: bool = Field(description="every hard rule passed (the rules themselves: detail full)")
    score: float = Field(description="the rerank score the candidates are ordered by, higher first")


class FullCouplet(CompactCouplet):
    checks: Checks
    lm_score: float = Field(description="the model's mean log-probability per character")


class YearInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    year: int = Field(description="the Gregorian year the Spring Festival falls in")
    ganzhi: str
    zodiac: str
    spring_festival: str = Field(description="its date, ISO 8601")
    label: str = Field(description="e.g. 丁未羊年")


class _AnswerFields(BaseModel):
    """Beside the best couplet (its fields at the top level) and ``couplets``: about the request and its year."""

    model_config = ConfigDict(extra="forbid")
    mode: Literal["write", "match", "reverse", "fill"] = Field(
        description="reverse: the given line was a 下联; fill: the open places of a couplet a person partly kept"
    )
    notice: str | None = Field(description="names characters of the person's own line a 春联 avoids")
    year: YearInfo
    script: Literal["simplified", "traditional"]
    cached: bool
    elapsed_ms: float
    seed: int | None
    tones_track: Literal["xin", "pingshui"]
    keywords: list[str] = Field(
        None, description="the wish words as read (write only)", json_schema_extra=lambda s: s.pop("default", None)
    )
    placement: Literal["embed", "acrostic", "theme"] = Field(
        None, description="write only", json_schema_extra=lambda s: s.pop("default", None)
    )
    layout: Layout = Field(description="as asked")


class CompactAnswer(_AnswerFields, CompactCouplet):
    """``detail`` compact (the default): the best couplet's fields, then every candidate, best first."""

    couplets: list[CompactCouplet]


class FullAnswer(_AnswerFields, FullCouplet):
    """``detail`` full: as compact, each couplet with its rule report."""

    couplets: list[FullCouplet]


CoupletAnswer = Annotated[
    Annotated[CompactAnswer, Tag("compact")] | Annotated[FullAnswer, Tag("full")],
    Discriminator(
        lambda v: "full" if ("checks" in v if isinstance(v, dict) else isinstance(v, FullAnswer)) else "compact"
    ),
]


class ShareAnswer(BaseModel):
    """A couplet's own page for a phone: its address and the QR code that opens it."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(description="the couplet itself, signed: /c/<id> redraws it on any replica, after a restart")
    url: str = Field(description="the page's address: public_url when set, else the address this was asked at")
    qr_svg: str = Field(description="the QR code of url, as an SVG data URI (an <img> src)")
    reachable: bool = Field(
        description="false when url is a loopback address (127.0.0.1, localhost) that a phone cannot open: "
        "serve on the LAN (--host 0.0.0.0) and set --public-url"
    )


COMPACT_FIELDS = ("upper", "lower", "horizontal", "tones", "score")
ANSWER_FIELDS = tuple(f for f in _AnswerFields.model_fields if f != "layout")


def _couplet(c: dict, full: bool) -> dict:
    """One couplet of the engine's answer (which always has its rule report) in the shape asked for."""
    out = {k: c[k] for k in COMPACT_FIELDS}
    out["hard_ok"] = c["checks"]["hard_ok"]
    if full:
        out["checks"], out["lm_score"] = c["checks"], c["lm_score"]
    return out


def shape_answer(ans: dict, detail: str, layout: str) -> dict:
    """The engine's answer (cached whole, so a cache hit serves either shape) as the API gives it."""
    full = detail == "full"
    return (
        _couplet(ans, full)
        | {k: ans[k] for k in ANSWER_FIELDS if k in ans}
        | {"layout": layout, "couplets": [_couplet(c, full) for c in ans["couplets"]]}
    )
