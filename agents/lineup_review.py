"""The weekly lineup review: read each configured provider's catalog, compare it with the last
one and with the competitors' current releases, and propose what staff may want to change.

Proposals (LineupProposal) are only proposals: a new model passing the operator's filters, a
price or context change of a model a competitor runs, a model that left the catalog, a catalog
that could not be read. Nothing in the lineup changes until a staff member approves one
(`approve_*` below, called by the admin): a new competitor, a new release of a competitor (for
the cohorts opened after it; running entries keep the release they were pinned to), or a
competitor taken out of the next cohorts.
"""

from __future__ import annotations

import copy
from datetime import date, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils.text import slugify

from agents.catalog import (
    Catalog,
    CatalogUnreadable,
    Filters,
    ListedModel,
    configured_catalogs,
    configured_filters,
    read_catalog,
)
from agents.models import CatalogModel, Competitor, LineupProposal, LineupReview, Release
from agents.services import NEW_MODEL_PARAMS
from core import clock

Kind = LineupProposal.Kind
# A review still unfinished after this belongs to a process that died: the next run redoes it.
REVIEW_STALE = timedelta(hours=2)
# The first read of a catalog knows nothing older to compare with: only models the catalog
# dates within this are proposed as new (else every model listed would be).
NEW_WINDOW = timedelta(days=7)


class ProposalError(Exception):
    """A proposal cannot be approved as asked; the message says why, in one line."""


def week_of(at: datetime) -> date:
    """The Sunday starting the (UTC) week of `at`: the week a review covers."""
    day = at.date()
    return day - timedelta(days=(day.weekday() + 1) % 7)


def review_lineup(now: datetime | None = None) -> dict[str, Any]:
    """This week's review, once: a second run (or one running at the same time) finds the week
    claimed and returns {"skipped": ...}."""
    now = now or clock.now()
    review = _claim(week_of(now), now)
    if review is None:
        return {"skipped": f"the review of the week of {week_of(now)} is done or running"}
    filters = configured_filters()
    summary = {c.name: review_catalog(review, c, filters, now) for c in configured_catalogs()}
    LineupReview.objects.filter(pk=review.pk).update(finished_at=clock.now(), summary=summary)
    return summary


def _claim(week: date, now: datetime) -> LineupReview | None:
    try:
        with transaction.atomic():
            return LineupReview.objects.create(week_start=week, started_at=now)
    except IntegrityError:
        pass
    # A claim left by a dead process is taken over by one conditional update (two takers: one).
    taken = LineupReview.objects.filter(
        week_start=week, finished_at__isnull=True, started_at__lt=now - REVIEW_STALE
    ).update(started_at=now)
    return LineupReview.objects.get(week_start=week) if taken else None


def review_catalog(
    review: LineupReview, catalog: Catalog, filters: Filters, now: datetime
) -> dict[str, int | str]:
    try:
        listed, skipped = read_catalog(catalog)
    except CatalogUnreadable as exc:
        _propose(review, now, Kind.UNREADABLE, catalog.name, detail=f"{catalog.url}: {exc}")
        return {"error": str(exc)}
    known = {m.model_id: m for m in CatalogModel.objects.filter(catalog=catalog.name)}
    first_read = not known
    fresh = {m.model_id: m for m in listed}
    gone = [m for m in known.values() if m.model_id not in fresh and m.gone_since is None]
    _remember(catalog, listed, known, gone, now)

    competitors = list(
        Competitor.objects.filter(kind=Competitor.Kind.LLM, active=True, provider=catalog.name)
        .exclude(model_id="")
        .order_by("pk")
    )
    used = {c.model_id for c in competitors}
    gone_ids = {m.model_id for m in gone}
    made = {kind: 0 for kind in (Kind.NEW_MODEL, Kind.CHANGED, Kind.DISAPPEARED)}
    for model in listed:
        if model.model_id in known or model.model_id in used or filters.why_not(model):
            continue
        if first_read and (model.created is None or model.created < now - NEW_WINDOW):
            continue
        made[Kind.NEW_MODEL] += _propose(review, now, Kind.NEW_MODEL, catalog.name, model)
    for competitor in competitors:
        listed_now = fresh.get(competitor.model_id)
        if listed_now is None:
            if first_read or competitor.model_id in gone_ids:
                detail = f"{competitor.display_name} runs {competitor.model_id}, which "
                detail += "is not in the catalog" if first_read else "left the catalog"
                made[Kind.DISAPPEARED] += _propose(
                    review, now, Kind.DISAPPEARED, catalog.name,
                    _stored(known.get(competitor.model_id), competitor.model_id),
                    competitor=competitor, detail=detail,
                )  # fmt: skip
            continue
        changes = release_changes(Release.current(competitor), listed_now)
        if changes:
            made[Kind.CHANGED] += _propose(
                review, now, Kind.CHANGED, catalog.name, listed_now,
                competitor=competitor, detail="; ".join(changes),
            )  # fmt: skip
    for stored in gone:
        model = _stored(stored, stored.model_id)
        if stored.model_id not in used and not filters.why_not(model):
            made[Kind.DISAPPEARED] += _propose(
                review, now, Kind.DISAPPEARED, catalog.name, model, detail="left the catalog"
            )
    return {"models": len(listed), "skipped": skipped, **{str(k): v for k, v in made.items()}}


def release_changes(release: Release, model: ListedModel) -> list[str]:
    """What the catalog says differently from the release's figures (a figure the release does
    not know, or the catalog does not give, is no change)."""
    changes = []
    for label, before, after in (
        ("prompt price", release.price_in_per_m, model.price_in_per_m),
        ("completion price", release.price_out_per_m, model.price_out_per_m),
    ):
        if before is not None and after is not None and before != after:
            changes.append(f"{label} ${before.normalize():f} → ${after.normalize():f} per M tokens")
    before_ctx, after_ctx = release.context_tokens, model.context_length
    if before_ctx is not None and after_ctx is not None and before_ctx != after_ctx:
        changes.append(f"context {before_ctx} → {after_ctx} tokens")
    return changes


def _remember(
    catalog: Catalog,
    listed: list[ListedModel],
    known: dict[str, CatalogModel],
    gone: list[CatalogModel],
    now: datetime,
) -> None:
    """Store what the catalog lists now, for the next review to compare with."""
    with transaction.atomic():
        for model in listed:
            figures = _figures(model)
            stored = known.get(model.model_id)
            if stored is None:
                CatalogModel.objects.create(
                    catalog=catalog.name, model_id=model.model_id, first_seen=now, last_seen=now,
                    **figures,
                )  # fmt: skip
            else:
                CatalogModel.objects.filter(pk=stored.pk).update(
                    last_seen=now, gone_since=None, **figures
                )
        CatalogModel.objects.filter(pk__in=[m.pk for m in gone]).update(gone_since=now)


def _figures(model: ListedModel) -> dict[str, Any]:
    return {
        "name": model.name,
        "context_length": model.context_length,
        "price_in_per_m": model.price_in_per_m,
        "price_out_per_m": model.price_out_per_m,
        "created": model.created,
    }


def _stored(stored: CatalogModel | None, model_id: str) -> ListedModel:
    if stored is None:
        return ListedModel(model_id, model_id, None, None, None, None)
    return ListedModel(
        stored.model_id, stored.name, stored.context_length, stored.price_in_per_m,
        stored.price_out_per_m, stored.created,
    )  # fmt: skip


def _propose(
    review: LineupReview,
    now: datetime,
    kind: str,
    catalog: str,
    model: ListedModel | None = None,
    *,
    competitor: Competitor | None = None,
    detail: str = "",
) -> int:
    """1 when a proposal was made; a pending one for the same model (and competitor) is brought
    up to date instead, so staff approve the latest figures."""
    model = model or ListedModel("", "", None, None, None, None)
    values = {**_figures(model), "detail": detail[:2000], "review": review, "proposed_at": now}
    key = {"kind": kind, "catalog": catalog, "model_id": model.model_id, "competitor": competitor}
    try:
        with transaction.atomic():
            LineupProposal.objects.create(**key, **values)
            return 1
    except IntegrityError:
        LineupProposal.objects.filter(status=LineupProposal.Status.PENDING, **key).update(**values)
        return 0


# --- staff decisions (the admin checks permissions before calling these) -------------------


def _pending(proposal_id: int, kinds: tuple[str, ...]) -> LineupProposal:
    proposal = LineupProposal.objects.select_for_update().filter(pk=proposal_id).first()
    if proposal is None:
        raise ProposalError(f"no lineup proposal #{proposal_id}")
    if proposal.status != LineupProposal.Status.PENDING:
        raise ProposalError(
            f"proposal #{proposal.pk} was already {proposal.get_status_display().lower()} "
            f"by {proposal.decided_by or 'someone'}"
        )
    if proposal.kind not in kinds:
        raise ProposalError(f"a proposal of kind {proposal.get_kind_display()!r} cannot do that")
    return proposal


def _decide(proposal: LineupProposal, by: str, status: str, outcome: str) -> None:
    proposal.status, proposal.decided_by, proposal.outcome = status, by[:150], outcome[:300]
    proposal.decided_at = clock.now()
    proposal.save(update_fields=["status", "decided_by", "outcome", "decided_at"])


def approve_as_competitor(proposal_id: int, by: str) -> Competitor:
    """A new model becomes a new competitor, in the cohorts opened from now on."""
    with transaction.atomic():
        proposal = _pending(proposal_id, (Kind.NEW_MODEL,))
        catalog = next((c for c in configured_catalogs() if c.name == proposal.catalog), None)
        base_url = ""
        if catalog is not None and catalog.url != settings.ARENA_LLM_BASE_URL:
            base_url = catalog.url
        competitor = Competitor.objects.create(
            slug=_free_slug(proposal.model_id),
            display_name=(proposal.name or proposal.model_id)[:120],
            kind=Competitor.Kind.LLM,
            family=proposal.model_id.split("/", 1)[0][:40],
            provider=proposal.catalog,
            model_id=proposal.model_id,
            base_url=base_url,
            params=copy.deepcopy(NEW_MODEL_PARAMS),
            context_tokens=proposal.context_length,
            price_in_per_m=proposal.price_in_per_m,
            price_out_per_m=proposal.price_out_per_m,
            notes=f"From the lineup review of the week of {proposal.review.week_start}.",
        )
        _decide(
            proposal, by, LineupProposal.Status.APPROVED,
            f"new competitor {competitor.slug}, in the cohorts opened from now on",
        )  # fmt: skip
        return competitor


def approve_as_release(proposal_id: int, by: str, competitor_id: int | None = None) -> Release:
    """A new release of a competitor: the changed figures of its model (a `changed` proposal),
    or a new model for it to run (a `new_model` proposal and the competitor chosen). Entries
    already running keep the release they were pinned to."""
    with transaction.atomic():
        proposal = _pending(proposal_id, (Kind.NEW_MODEL, Kind.CHANGED))
        if proposal.kind == Kind.CHANGED:
            competitor = proposal.competitor
        else:
            competitor = (
                Competitor.objects.filter(pk=competitor_id).first() if competitor_id else None
            )
        if competitor is None:
            raise ProposalError("choose the competitor that is to run this model")
        competitor = Competitor.objects.select_for_update().get(pk=competitor.pk)
        if competitor.kind != Competitor.Kind.LLM or competitor.provider != proposal.catalog:
            raise ProposalError(
                f"{competitor.display_name} is not a model competitor of provider "
                f"{proposal.catalog!r}"
            )
        before = Release.current(competitor)
        if proposal.kind == Kind.NEW_MODEL:
            competitor.model_id = proposal.model_id
            competitor.context_tokens = proposal.context_length
            competitor.price_in_per_m = proposal.price_in_per_m
            competitor.price_out_per_m = proposal.price_out_per_m
        else:
            if proposal.price_in_per_m is not None:
                competitor.price_in_per_m = proposal.price_in_per_m
            if proposal.price_out_per_m is not None:
                competitor.price_out_per_m = proposal.price_out_per_m
            if proposal.context_length is not None and competitor.context_tokens is not None:
                competitor.context_tokens = proposal.context_length
        competitor.save()
        release = Release.current(competitor)
        if release.pk == before.pk:
            outcome = f"no change: release {release.number} of {competitor.slug} already has it"
        else:
            outcome = (
                f"release {release.number} of {competitor.slug}, for the cohorts opened from now on"
            )
        _decide(proposal, by, LineupProposal.Status.APPROVED, outcome)
        return release


def approve_retirement(proposal_id: int, by: str) -> Competitor:
    """A competitor whose model left the catalog is left out of the cohorts opened from now on
    (its running entries go on, and fail with the provider's answer if the model is gone)."""
    with transaction.atomic():
        proposal = _pending(proposal_id, (Kind.DISAPPEARED,))
        competitor = proposal.competitor
        if competitor is None:
            raise ProposalError("no competitor runs this model: dismiss the proposal instead")
        Competitor.objects.filter(pk=competitor.pk).update(active=False)
        _decide(
            proposal, by, LineupProposal.Status.APPROVED,
            f"{competitor.slug} deactivated: not in the cohorts opened from now on",
        )  # fmt: skip
        return competitor


def dismiss(proposal_id: int, by: str) -> LineupProposal:
    with transaction.atomic():
        proposal = _pending(proposal_id, tuple(Kind.values))
        _decide(proposal, by, LineupProposal.Status.DISMISSED, "dismissed")
        return proposal


def _free_slug(model_id: str) -> str:
    base = slugify(model_id.replace("/", "-").replace(".", "-"))[:70] or "model"
    slug, n = base, 1
    while Competitor.objects.filter(slug=slug).exists():
        n += 1
        slug = f"{base}-{n}"
    return slug
