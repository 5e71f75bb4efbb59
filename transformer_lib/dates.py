"""The built-in translation task: human-written dates -> ISO dates, generated offline.

A source is a date as people write it, in English, French, German or Spanish, or in
numbers; the target is its ISO 8601 form::

    "Saturday, 5 March 2021"  "5th of MARCH, 2021"  "samedi 5 mars 2021"
    "5. März 2021"  "sábado, 5 de marzo de 2021"  "03/05/21"  "05.03.2021"  -> "2021-03-05"

Small enough to train in a minute on a CPU, yet a real sequence-to-sequence task whose
cross-attention can be read: the month word lines up with the month digits.

Conventions that keep every source unambiguous (one source string, one date):

- dates run from 1 January 1950 to 31 December 2049; a two-digit year ``yy`` means
  ``19yy`` if ``yy >= 50`` else ``20yy``;
- the separator decides the order of numbers: ``/`` puts the month before the day (US:
  ``03/05/21``, and ``2021/03/05``), ``.`` puts the day first (European: ``05.03.2021``),
  ``-`` is ISO (``2021-03-05``); ``20210305`` is year, month, day;
- a weekday, where written, is the true weekday of the date.

:func:`make_date_splits` draws train, validation and test sets whose underlying dates are
disjoint, deterministically from ``seed`` (string-seeded ``random.Random``, independent of
the Python hash seed).
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .checks import check_int

DATE_MIN, DATE_MAX = dt.date(1950, 1, 1), dt.date(2049, 12, 31)
LANGUAGES = ("en", "fr", "de", "es")
CASES = ("keep", "lower", "upper")
CASE_WEIGHTS = (0.6, 0.2, 0.2)

MONTHS = {
    "en": "January February March April May June July August September October November "
    "December".split(),
    "fr": "janvier février mars avril mai juin juillet août septembre octobre novembre "
    "décembre".split(),
    "de": "Januar Februar März April Mai Juni Juli August September Oktober November "
    "Dezember".split(),
    "es": "enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre "
    "diciembre".split(),
}
MONTHS_ABBR = {
    "en": "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(),
    "fr": "janv. févr. mars avr. mai juin juil. août sept. oct. nov. déc.".split(),
    "de": "Jan. Feb. März Apr. Mai Juni Juli Aug. Sep. Okt. Nov. Dez.".split(),
    "es": "ene. feb. mar. abr. may. jun. jul. ago. sept. oct. nov. dic.".split(),
}
WEEKDAYS = {  # Monday first, as date.weekday()
    "en": "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split(),
    "fr": "lundi mardi mercredi jeudi vendredi samedi dimanche".split(),
    "de": "Montag Dienstag Mittwoch Donnerstag Freitag Samstag Sonntag".split(),
    "es": "lunes martes miércoles jueves viernes sábado domingo".split(),
}


def _en_ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _fr_day(n: int) -> str:
    return "1er" if n == 1 else str(n)


def _parts(d: dt.date, lang: str) -> Tuple[str, str, str, int, int, int]:
    """(month name, month abbreviation, weekday, day, year, two-digit year)."""
    return (
        MONTHS[lang][d.month - 1],
        MONTHS_ABBR[lang][d.month - 1],
        WEEKDAYS[lang][d.weekday()],
        d.day,
        d.year,
        d.year % 100,
    )


def _fmt(lang: str, template: Callable) -> Callable[[dt.date], str]:
    return lambda d: template(*_parts(d, lang))


FORMATS: Dict[str, Callable[[dt.date], str]] = {
    # English
    "en_d_month_y": _fmt("en", lambda m, a, w, d, y, yy: f"{d} {m} {y}"),
    "en_month_d_y": _fmt("en", lambda m, a, w, d, y, yy: f"{m} {d}, {y}"),
    "en_ordinal_of": _fmt("en", lambda m, a, w, d, y, yy: f"{_en_ordinal(d)} of {m}, {y}"),
    "en_month_ordinal": _fmt("en", lambda m, a, w, d, y, yy: f"{m} {_en_ordinal(d)}, {y}"),
    "en_weekday_d_month": _fmt("en", lambda m, a, w, d, y, yy: f"{w}, {d} {m} {y}"),
    "en_weekday_month_d": _fmt("en", lambda m, a, w, d, y, yy: f"{w}, {m} {d}, {y}"),
    "en_d_abbr_y": _fmt("en", lambda m, a, w, d, y, yy: f"{d} {a} {y}"),
    "en_d_abbr_yy": _fmt("en", lambda m, a, w, d, y, yy: f"{d:02d}-{a}-{yy:02d}"),
    # French
    "fr_d_month_y": _fmt("fr", lambda m, a, w, d, y, yy: f"{_fr_day(d)} {m} {y}"),
    "fr_weekday": _fmt("fr", lambda m, a, w, d, y, yy: f"{w} {_fr_day(d)} {m} {y}"),
    "fr_le": _fmt("fr", lambda m, a, w, d, y, yy: f"le {_fr_day(d)} {m} {y}"),
    "fr_abbr": _fmt("fr", lambda m, a, w, d, y, yy: f"{_fr_day(d)} {a} {y}"),
    # German
    "de_d_month_y": _fmt("de", lambda m, a, w, d, y, yy: f"{d}. {m} {y}"),
    "de_weekday": _fmt("de", lambda m, a, w, d, y, yy: f"{w}, {d}. {m} {y}"),
    "de_am": _fmt("de", lambda m, a, w, d, y, yy: f"am {d:02d}. {m} {y}"),
    "de_abbr": _fmt("de", lambda m, a, w, d, y, yy: f"{d}. {a} {y}"),
    # Spanish
    "es_de": _fmt("es", lambda m, a, w, d, y, yy: f"{d} de {m} de {y}"),
    "es_weekday": _fmt("es", lambda m, a, w, d, y, yy: f"{w}, {d} de {m} de {y}"),
    "es_el": _fmt("es", lambda m, a, w, d, y, yy: f"el {d} de {m} de {y}"),
    "es_abbr": _fmt("es", lambda m, a, w, d, y, yy: f"{d} {a} {y}"),
    # Numbers: "/" = month first (US), "." = day first (European), "-" = ISO
    "us_slash_yy": lambda d: f"{d.month:02d}/{d.day:02d}/{d.year % 100:02d}",
    "us_slash": lambda d: f"{d.month}/{d.day}/{d.year}",
    "us_slash_padded": lambda d: f"{d.month:02d}/{d.day:02d}/{d.year}",
    "eu_dots": lambda d: f"{d.day:02d}.{d.month:02d}.{d.year}",
    "eu_dots_yy": lambda d: f"{d.day}.{d.month}.{d.year % 100:02d}",
    "iso": lambda d: d.isoformat(),
    "ymd_slash": lambda d: f"{d.year}/{d.month:02d}/{d.day:02d}",
    "compact": lambda d: f"{d.year}{d.month:02d}{d.day:02d}",
    "ja": lambda d: f"{d.year}年{d.month}月{d.day}日",
}
DATE_FORMATS = tuple(FORMATS)


def format_date(date: dt.date, fmt: str, case: str = "keep") -> str:
    """Write ``date`` in format ``fmt`` (a name in ``DATE_FORMATS``) and letter ``case``."""
    if not isinstance(date, dt.date):
        raise TypeError(f"date must be a datetime.date, got {type(date).__name__}")
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of DATE_FORMATS, got {fmt!r}")
    if case not in CASES:
        raise ValueError(f"case must be one of {CASES}, got {case!r}")
    text = FORMATS[fmt](date)
    return {"keep": text, "lower": text.lower(), "upper": text.upper()}[case]


def _examples(
    dates: Sequence[dt.date], n: int, formats: Sequence[str], rng: random.Random
) -> List[Tuple[str, str]]:
    """``n`` examples cycling through ``dates``, each in a random format and case."""
    out = []
    for i in range(n):
        d = dates[i % len(dates)]
        fmt = rng.choice(formats)
        case = rng.choices(CASES, CASE_WEIGHTS)[0]
        out.append((format_date(d, fmt, case), d.isoformat()))
    return out


def _check_formats(formats: Sequence[str]) -> List[str]:
    """``formats`` as a non-empty list of names in ``DATE_FORMATS``."""
    formats = list(formats)
    unknown = [f for f in formats if f not in FORMATS]
    if not formats or unknown:
        raise ValueError(
            f"formats must be a non-empty list of DATE_FORMATS names, got unknown {unknown}"
            if unknown
            else "formats is empty"
        )
    return formats


def make_date_splits(
    n_train: int = 20000,
    n_valid: int = 1000,
    n_test: int = 1000,
    seed: int = 0,
    formats: Optional[Sequence[str]] = None,
) -> Dict[str, List[Tuple[str, str]]]:
    """Train/valid/test lists of ``(source, "YYYY-MM-DD")`` pairs, deterministic by ``seed``.

    The days from ``DATE_MIN`` to ``DATE_MAX`` are shuffled once; the test set takes the
    first ``n_test`` days, validation the next ``n_valid``, training draws from the rest
    (cycling only if ``n_train`` exceeds them), so the three sets share no date. Each
    example has a random format from ``formats`` (default: all of ``DATE_FORMATS``).
    """
    for name, value in (("n_train", n_train), ("n_valid", n_valid), ("n_test", n_test)):
        check_int(value, name, 0)
    check_int(seed, "seed")
    formats = _check_formats(DATE_FORMATS if formats is None else formats)
    n_days = (DATE_MAX - DATE_MIN).days + 1
    if n_test + n_valid + (n_train > 0) > n_days:
        raise ValueError(
            f"n_test + n_valid = {n_test + n_valid} leaves no day for training "
            f"({n_days} days from {DATE_MIN} to {DATE_MAX})"
        )
    days = [DATE_MIN + dt.timedelta(days=i) for i in range(n_days)]
    random.Random(f"dates-{seed}").shuffle(days)
    pools = {
        "test": days[:n_test],
        "valid": days[n_test : n_test + n_valid],
        "train": days[n_test + n_valid :],
    }
    sizes = {"train": n_train, "valid": n_valid, "test": n_test}
    return {
        name: _examples(pools[name], sizes[name], formats, random.Random(f"dates-{seed}-{name}"))
        for name in ("train", "valid", "test")
    }
