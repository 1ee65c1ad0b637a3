"""What a staff correction would do to the books, read inside its dry run
(markets.corrections.preview_resolution): the settlements it reverses and the new ones with
their payouts, and each touched entry's cash and P/L before and after. Registered with
markets.admin.PREVIEW, since only this floor knows positions and settlements.

P/L is an entry's value (its latest snapshot's total, which a settlement rewrites in the same
transaction) minus its starting balance: the figure the cohort page shows."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from cohorts.models import Entry, Position, Settlement, Snapshot
from markets.models import Market


@dataclass(frozen=True)
class SettlementLine:
    entry: str  # "Competitor (cohort label)"
    market_id: int
    kind: str
    outcome: str
    shares: Decimal
    payout: Decimal


@dataclass(frozen=True)
class EntryLine:
    entry_id: int
    entry: str
    cash_before: Decimal
    cash_after: Decimal
    pnl_before: Decimal
    pnl_after: Decimal

    @property
    def moved(self) -> bool:
        return (self.cash_before, self.pnl_before) != (self.cash_after, self.pnl_after)


@dataclass
class SettlementSection:
    template = "admin/cohorts/correction_preview_settlements.html"
    reversed: list[SettlementLine] = field(default_factory=list)
    new: list[SettlementLine] = field(default_factory=list)
    entries: list[EntryLine] = field(default_factory=list)

    @property
    def taken_back(self) -> Decimal:
        return sum((s.payout for s in self.reversed), Decimal("0.00"))

    @property
    def paid(self) -> Decimal:
        return sum((s.payout for s in self.new), Decimal("0.00"))


@dataclass(frozen=True)
class _Books:
    live: set[int]  # live settlement ids
    figures: dict[int, tuple[Decimal, Decimal]]  # entry id -> (cash, P/L)


def _entry_ids(markets: list[Market]) -> list[int]:
    return sorted(
        set(
            Position.objects.filter(market__in=markets)
            .values_list("entry_id", flat=True)
            .distinct()
        )
    )


def _figures(entry_ids: list[int]) -> dict[int, tuple[Decimal, Decimal]]:
    latest: dict[int, Decimal] = {}
    for entry_id, total in (
        Snapshot.objects.filter(entry_id__in=entry_ids)
        .order_by("entry_id", "-ts", "-pk")
        .values_list("entry_id", "total")
    ):
        latest.setdefault(entry_id, total)
    out = {}
    for pk, cash, initial in Entry.objects.filter(pk__in=entry_ids).values_list(
        "pk", "cash", "initial_balance"
    ):
        value = latest.get(pk, cash)
        out[pk] = (cash, Decimal(value).quantize(Decimal("0.01")) - initial)
    return out


def _names(entry_ids: set[int]) -> dict[int, str]:
    return {
        e.pk: f"{e.competitor.display_name} ({e.cohort})"
        for e in Entry.objects.filter(pk__in=entry_ids).select_related("competitor", "cohort")
    }


def _lines(rows: list[Settlement], names: dict[int, str]) -> list[SettlementLine]:
    return [
        SettlementLine(
            entry=names.get(s.position.entry_id, f"entry {s.position.entry_id}"),
            market_id=s.market_id,
            kind=s.get_kind_display(),
            outcome=s.outcome,
            shares=s.shares,
            payout=s.payout,
        )
        for s in rows
    ]


class SettlementPreview:
    """markets.corrections.PreviewReader for the books; also read around the real change, so
    the result page repeats the preview's figures from what was written."""

    on_apply = True

    def before(self, markets: list[Market], deadline: float) -> _Books:
        live = set(
            Settlement.objects.filter(market__in=markets, reversed_at__isnull=True).values_list(
                "pk", flat=True
            )
        )
        return _Books(live=live, figures=_figures(_entry_ids(markets)))

    def after(self, markets: list[Market], before: _Books, deadline: float) -> SettlementSection:
        settlements = Settlement.objects.filter(market__in=markets).select_related("position")
        reversed_ = [
            s for s in settlements.filter(pk__in=before.live, reversed_at__isnull=False)
        ]
        new = [
            s for s in settlements.filter(reversed_at__isnull=True).exclude(pk__in=before.live)
        ]
        entry_ids = _entry_ids(markets)
        after = _figures(entry_ids)
        names = _names(set(entry_ids))
        entries = [
            EntryLine(
                entry_id=pk,
                entry=names[pk],
                cash_before=before.figures.get(pk, after[pk])[0],
                cash_after=after[pk][0],
                pnl_before=before.figures.get(pk, after[pk])[1],
                pnl_after=after[pk][1],
            )
            for pk in entry_ids
        ]
        entries.sort(key=lambda e: (not e.moved, e.entry))
        return SettlementSection(
            reversed=_lines(sorted(reversed_, key=lambda s: s.pk), names),
            new=_lines(sorted(new, key=lambda s: s.pk), names),
            entries=entries,
        )
