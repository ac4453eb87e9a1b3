"""The numbers of ``ncu_csv``'s value cells: the file's decimal mark, and cells as floats.

ncu prints numbers in the machine's locale (``"8,192"``, ``"65,77"``) and scales units per
value (``usecond`` here, ``msecond`` there), so every cell is read against its file's decimal
mark and its own unit, into the canonical unit of ``_units``. Details-page series are read a
series at a time, raw pages a table at a time: the large files are the ones worth the speed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation
from itertools import chain
from operator import itemgetter
from typing import TYPE_CHECKING

from perfci.core.errors import ParseError
from perfci.core.limits import MAX_VALUE
from perfci.formats._textio import scaled_decimal
from perfci.formats.ncu._units import UnitScale, scale

if TYPE_CHECKING:
    from perfci.formats.ncu._csv_reader import Series

__all__ = ["Converter", "choose_decimal_mark", "series_numbers"]

#: ``float`` reads ``nan``, ``inf``, ``1_0`` and blanks, which are not plain numbers.
_NOT_PLAIN = ("n", "N", "i", "I", "_", " ", "\t")
_MISSING = frozenset({"", "n/a", "N/A", "-", "--", "nan", "NaN"})
_NUMBER_CELL = re.compile(r"[+-]?[0-9][0-9.,]*(?:[eE][+-]?[0-9]+)?")


def choose_decimal_mark(option: str | None, cells: Iterable[str], *, format_name: str) -> str:
    """``.`` or ``,``: the option, else the first number cell that shows which, else ``.``.

    ``6.52``, ``1,234.5``, ``1,215,000`` or ``0.125`` show ``.``; ``65,77``, ``27.595.520`` or
    ``1.234,5`` show ``,``. One separator before exactly three digits (``8,192``, ``117.344``)
    shows nothing: it groups thousands in one locale and is the decimal mark in the other.
    """
    if option is not None:
        if option not in (".", ","):
            raise ParseError(f"decimal_mark must be '.' or ',', not {option!r}", format=format_name)
        return option
    for cell in cells:
        if ("," not in cell and "." not in cell) or not _NUMBER_CELL.fullmatch(cell):
            continue
        dots, commas = cell.count("."), cell.count(",")
        if dots and commas:
            return "." if cell.rfind(".") > cell.rfind(",") else ","
        if dots > 1 or commas > 1:
            return "," if dots else "."
        mark = "." if dots else ","
        whole, _, tail = cell.lstrip("+-").partition(mark)
        if "e" in tail or "E" in tail or len(tail) != 3 or whole == "0":
            return mark
    return "."


class Converter:
    """Value cells as floats in a canonical unit (``10**power`` times the cell's number).

    Many cells at a time: one ``replace`` over the joined cells drops the grouping, one more
    appends the power as an exponent (``12.5`` → ``12.5e3``, so that ``float`` rounds the exact
    product once, as ``perfci.core.units`` does), and ``map(float, …)`` reads them all. Cells that
    are not all plain numbers (``n/a``, ``nan``, ``4.0e-05`` with a power, a string) take the
    cell-by-cell path, memoised per power, which gives the same numbers.
    """

    def __init__(self, mark: str) -> None:
        self.mark = mark
        self.caches: dict[int, dict[str, float | None]] = {}

    def clean(self, text: str) -> str:
        """``text`` without its thousands grouping, with ``.`` as the decimal mark."""
        if self.mark == ",":
            return text.replace(".", "").replace(",", ".")
        return text.replace(",", "")

    def many(self, cells: list[str], power: int) -> list[float]:
        """The numbers among ``cells``; ``n/a`` and strings left out."""
        return self._cleaned(self.clean("\n".join(cells)), power)

    def one(self, cell: str, power: int) -> float | None:
        """One cell's number, ``None`` for ``n/a`` or a string."""
        return self._cleaned_cell(self.clean(cell), power)

    def table(
        self, rows: list[list[str]], cols: tuple[int, ...], powers: list[int]
    ) -> list[list[float]]:
        """The numbers of columns ``cols`` of ``rows`` (a raw page's), a list per column.

        The columns whose first cell is a number are read together, row by row, in the order
        the cells were made: a column at a time would jump between rows, and on a wide page
        the cache misses cost more than the parsing. The others (strings such as a device's
        name, ``n/a``) are read a column at a time.
        """
        if not rows:
            return [[] for _ in cols]
        first = rows[0]
        columns: list[list[float] | None] = [None] * len(cols)
        together = [j for j, col in enumerate(cols) if self.one(first[col], 0) is not None]
        if len(together) > 1:
            block = self._block(rows, [cols[j] for j in together], [powers[j] for j in together])
            for j, values in zip(together, block, strict=True):
                columns[j] = values
        return [
            values if values is not None else self.many([row[col] for row in rows], power)
            for values, col, power in zip(columns, cols, powers, strict=True)
        ]

    def _block(
        self, rows: list[list[str]], cols: list[int], powers: list[int]
    ) -> list[list[float]]:
        width = len(cols)
        pick = itemgetter(*cols)
        text = self.clean("\n".join(chain.from_iterable(pick(row) for row in rows)))
        numbers: list[float] | None = None
        if _plain(text):
            try:
                numbers = list(map(float, text.split("\n")))
            except ValueError:
                numbers = None  # an empty cell, a lone sign
        parts = text.split("\n") if numbers is None or any(powers) else []
        columns = []
        for offset, power in enumerate(powers):
            if numbers is not None and not power:
                columns.append(numbers[offset::width])
            else:
                columns.append(self._cleaned("\n".join(parts[offset::width]), power))
        return columns

    def _cleaned(self, text: str, power: int) -> list[float]:
        """The numbers of ``text``: cleaned cells joined by line breaks."""
        if _plain(text):
            suffixed = text
            if power:
                suffix = f"e{power}"
                suffixed = text.replace("\n", suffix + "\n") + suffix
            try:
                return list(map(float, suffixed.split("\n")))
            except ValueError:
                pass  # an empty cell, a lone sign, an exponent already there
        cells = text.split("\n")
        cache = self.caches.get(power)
        if cache is None:
            cache = self.caches[power] = {}
        for cell in set(cells).difference(cache):
            cache[cell] = self._cleaned_cell(cell, power)
        values = [cache[cell] for cell in cells]
        return [value for value in values if value is not None]

    @staticmethod
    def _cleaned_cell(cell: str, power: int) -> float | None:
        text = cell.strip().replace("\u00a0", "").replace(" ", "")
        if text in _MISSING:
            return None
        value = scaled_decimal(text, power)
        if value is not None:
            return value
        try:
            number = Decimal(text)
        except InvalidOperation:
            return None  # a string metric: CachePreferNone, Hopper, (256, 1, 1)
        if not number.is_finite():
            return None
        return float(number.scaleb(power))


def _plain(text: str) -> bool:
    """Whether ``float`` reads every line of ``text`` as the number it spells, or fails:
    it also reads ``nan``, ``inf``, ``1_0``, blanks and non-ASCII digits."""
    return text.isascii() and not any(char in text for char in _NOT_PLAIN)


def series_numbers(
    series: Series, convert: Converter, warnings: list[str]
) -> tuple[UnitScale, list[float]]:
    """The series' numbers in the canonical unit of its first unit, in launch order.

    ncu scales units per value (one launch ``usecond``, the next ``msecond``): each value is
    converted with its own unit; one whose unit has another canonical unit is left out, as is
    one beyond ``±MAX_VALUE``, whose sums would overflow (issue 31).
    """
    unit, values = _numbers(series, convert, warnings)
    if values and not -MAX_VALUE <= min(values) <= max(values) <= MAX_VALUE:
        kept = [value for value in values if -MAX_VALUE <= value <= MAX_VALUE]
        warnings.append(
            f"{series.name} of {series.kernel[:80]}: {len(values) - len(kept)} value(s) "
            f"beyond {MAX_VALUE:g} were left out"
        )
        values = kept
    return unit, values


def _numbers(
    series: Series, convert: Converter, warnings: list[str]
) -> tuple[UnitScale, list[float]]:
    units = series.units
    first = scale(units[0])
    if series.numbers is not None:
        return first, series.numbers
    if units.count(units[0]) == len(units):
        return first, convert.many(series.values, first.power)
    values: list[float] = []
    mixed = 0
    for cell, unit in zip(series.values, units, strict=True):
        scaled = scale(unit)
        if scaled.unit != first.unit:
            mixed += 1
            continue
        value = convert.one(cell, scaled.power)
        if value is not None:
            values.append(value)
    if mixed:
        warnings.append(
            f"{series.name} of {series.kernel[:80]}: {mixed} value(s) in units that do not "
            f"convert to {first.unit} were left out"
        )
    return first, values
