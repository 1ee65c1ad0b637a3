"""A dollar amount as every reader sees it, on the public pages and in the admin alike: two
decimals, a real minus sign, and a model cost below a cent with up to four
decimals ("$0.0012", "<$0.0001") instead of the column's ten ("0.0000000000")."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal

# A real minus sign (the width of +, never mistaken for a hyphen) glued to what follows by a word
# joiner: browsers may otherwise wrap a narrow column between "−" and "$3,143.17".
MINUS = "\u2212\u2060"
CENT = Decimal("0.01")
SMALLEST = Decimal("0.0001")


def format_money(d: Decimal) -> str:
    sign = MINUS if d < 0 else ""
    a = abs(d)
    if a == a.quantize(CENT) or a >= 1:
        return f"{sign}${a.quantize(CENT, rounding=ROUND_HALF_EVEN):,.2f}"
    if a < SMALLEST:
        return f"{sign}<$0.0001"
    text = f"{a.quantize(SMALLEST, rounding=ROUND_HALF_EVEN):.4f}".rstrip("0")
    return f"{sign}${text if len(text.split('.')[1]) >= 2 else f'{a:.2f}'}"
