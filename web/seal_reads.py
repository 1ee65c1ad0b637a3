"""Reads of the sealed records (cohorts/seals/sealing.py; docs/verification.md) as the pages and the API
show them: week roots, the digests each covers, the event logs' heads, a decision's seal."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from cohorts.models import Cohort, Decision
from cohorts.seals.models import DecisionDigest, EventLogEntry, WeekSeal


def seal_feed(kind: str | None = None, cohort_id: int | None = None) -> QuerySet[WeekSeal]:
    """Week roots, newest first."""
    qs = WeekSeal.objects.select_related("cohort").order_by("-sealed_at", "-id")
    if kind in Cohort.Kind.values:
        qs = qs.filter(scope=kind)
    if cohort_id is not None:
        qs = qs.filter(cohort_id=cohort_id)
    return qs


def seal_digests(seals: list[WeekSeal]) -> dict[int, list[DecisionDigest]]:
    """seal id -> the digests its root covers (without the stored record bytes)."""
    weeks = {(s.cohort_id, s.week) for s in seals}
    chains: dict[tuple[int, int], list[DecisionDigest]] = {}
    cohort_ids = {c for c, _ in weeks}
    for dg in (
        DecisionDigest.objects.filter(cohort_id__in=cohort_ids)
        .defer("record")
        .order_by("cohort_id", "week", "seq")
    ):
        if (dg.cohort_id, dg.week) in weeks:
            chains.setdefault((dg.cohort_id, dg.week), []).append(dg)
    return {s.pk: chains.get((s.cohort_id, s.week), [])[: s.count] for s in seals}


def event_log_heads() -> list[dict[str, Any]]:
    heads = []
    for scope in sorted(set(EventLogEntry.objects.values_list("scope", flat=True).distinct())):
        head = EventLogEntry.objects.filter(scope=scope).defer("record").order_by("-seq").first()
        heads.append(
            {"scope": scope, "count": head.seq, "head": head.link, "updated_at": head.created_at}
        )
    return heads


def cohort_seal_rows(cohort: Cohort) -> QuerySet[WeekSeal]:
    """The cohort's roots in week order (its page has the cohort: no join to read it again)."""
    return WeekSeal.objects.filter(cohort_id=cohort.pk).order_by("week", "seq")


def decision_seal(decision: Decision) -> dict[str, Any] | None:
    """The decision's latest digest and the roots that cover it (None: not sealed yet)."""
    digest = (
        DecisionDigest.objects.filter(decision=decision).defer("record").order_by("-seq").first()
    )
    if digest is None:
        return None
    roots = list(
        WeekSeal.objects.filter(
            cohort_id=digest.cohort_id, week=digest.week, count__gte=digest.seq
        ).order_by("seq")
    )
    return {"digest": digest, "roots": roots, "amended": digest.amendment}
