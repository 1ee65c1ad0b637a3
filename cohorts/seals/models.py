"""The append-only records of sealing (docs/verification.md; the code is cohorts/seals/sealing.py).

    DecisionDigest  one link of a cohort-week's chain: a decision's record (or a "pending"
                    placeholder for an entry whose decision was not final when the week sealed),
                    its SHA-256, the previous link and this link
    WeekSeal        a root over the chain of one cohort-week: seq 1 is the week's seal, later
                    seqs are amendments (decisions that became final after the seal)
    EventLogEntry   one link of the event log of a scope (live/replay/demo): week seals,
                    resolutions, settlements, reversals, identity and cohort states, score runs
    StateRecord     a competitor's identity or a cohort's state as the application last wrote
                    it in a scope (what the event log's identity/cohort records are read from)
    Checkpoint      a signed (size, head, time) of a scope's event log (cohorts/seals/sign.py)
    SealPublication where and when a WeekSeal's root was published outside (operational, mutable)

Append-only is enforced three times: the models refuse save() of an existing row, delete() and
queryset update()/delete() of live rows; the admin is read-only; and the database refuses UPDATE
(PostgreSQL and SQLite triggers) and DELETE of live rows (triggers on both engines; `flush`, the
one deliberate wipe, lifts the SQLite guard for its own statements: cohorts/management).
Rows of replay and demo scopes may be deleted: `arena demo --reset` removes a whole simulation.
The foreign keys to decisions, entries and cohorts are PROTECT (NO ACTION in the database), so a
sealed decision or cohort cannot be deleted out from under its digest either.

Models here use string references only: cohorts/models.py imports this module at its end.
"""

from __future__ import annotations

import zlib

from django.db import models

LIVE = "live"


class AppendOnlyError(Exception):
    """A sealed record was about to be changed or deleted."""


class AppendOnlyQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise AppendOnlyError(f"{self.model.__name__} rows are append-only")

    def delete(self):
        if self.filter(scope=LIVE).exists():
            raise AppendOnlyError(f"{self.model.__name__} rows of live cohorts are never deleted")
        return super().delete()


class AppendOnly(models.Model):
    """Base: insert once, never change; delete only simulation (replay/demo) rows."""

    objects = AppendOnlyQuerySet.as_manager()
    scope: str  # a column of every concrete subclass: live rows are never deleted

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AppendOnlyError(f"{type(self).__name__} {self.pk} is append-only")
        kwargs["force_insert"] = True
        return super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        if self.scope == LIVE:
            raise AppendOnlyError(f"{type(self).__name__} {self.pk} belongs to a live cohort")
        return super().delete(*args, **kwargs)


class Chained(AppendOnly):
    """A link: the record's canonical bytes (zlib), their hash, and the chain hashes."""

    scope = models.CharField(max_length=10, help_text="live, replay or demo")
    seq = models.PositiveIntegerField(help_text="1-based position in its chain")
    record = models.BinaryField(help_text="zlib of the record's canonical JSON (RFC 8785)")
    record_hash = models.CharField(max_length=64)
    prev = models.CharField(max_length=64, help_text="the previous link (or the genesis hash)")
    link = models.CharField(max_length=64, help_text="sha256 over (prev, record_hash, seq)")
    created_at = models.DateTimeField()

    class Meta:
        abstract = True

    def record_bytes(self) -> bytes:
        return zlib.decompress(bytes(self.record))


class DecisionDigest(Chained):
    class State(models.TextChoices):
        FINAL = "final", "Final decision"
        PENDING = "pending", "Not final when sealed"

    cohort = models.ForeignKey("cohorts.Cohort", on_delete=models.PROTECT, related_name="digests")
    week = models.PositiveSmallIntegerField()
    entry = models.ForeignKey("cohorts.Entry", on_delete=models.PROTECT, related_name="digests")
    decision = models.ForeignKey(
        "cohorts.Decision",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="digests",
    )
    state = models.CharField(max_length=10, choices=State.choices)
    status = models.CharField(max_length=10, blank=True, help_text="the decision's status")
    amendment = models.BooleanField(default=False, help_text="appended after the week's seal")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cohort", "week", "seq"], name="digest_chain_seq_uniq")
        ]
        indexes = [models.Index(fields=["decision", "seq"], name="digest_decision_idx")]
        ordering = ["cohort", "week", "seq"]

    def __str__(self) -> str:
        return f"Digest {self.cohort_id}/w{self.week}#{self.seq}"


class WeekSeal(AppendOnly):
    class Reason(models.TextChoices):
        COMPLETE = "complete", "Every decision final"
        DEADLINE = "deadline", "Seal deadline passed"
        SETTLEMENT = "settlement", "A market of the week was about to settle"
        AMENDMENT = "amendment", "Decisions final after the seal"

    cohort = models.ForeignKey("cohorts.Cohort", on_delete=models.PROTECT, related_name="seals")
    scope = models.CharField(max_length=10, help_text="the cohort's kind")
    week = models.PositiveSmallIntegerField()
    seq = models.PositiveIntegerField(help_text="1: the week's seal; 2 and up: amendments")
    count = models.PositiveIntegerField(help_text="digests covered: seq 1 .. count")
    root = models.CharField(max_length=64, help_text="the link of digest `count`")
    genesis = models.CharField(max_length=64)
    reason = models.CharField(max_length=12, choices=Reason.choices)
    format = models.CharField(max_length=20)
    sealed_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cohort", "week", "seq"], name="weekseal_seq_uniq")
        ]
        ordering = ["-sealed_at", "-id"]

    def __str__(self) -> str:
        return f"Seal {self.cohort_id}/w{self.week}#{self.seq} {self.root[:12]}"


class EventLogEntry(Chained):
    class Kind(models.TextChoices):
        RESOLUTION = "resolution", "Resolution change"
        SETTLEMENT = "settlement", "Settlement"
        REVERSAL = "reversal", "Settlement reversal"
        SEAL = "seal", "Week seal"
        IDENTITY = "identity", "Competitor identity"
        COHORT = "cohort_state", "Cohort state"
        SCORE_RUN = "score_run", "Score run"
        ENTRY = "entry", "Entry and its release"
        KEY = "key", "Signing key in force"

    kind = models.CharField(max_length=12, choices=Kind.choices)
    ref = models.BigIntegerField(
        help_text="ResolutionChange, Settlement, WeekSeal, StateRecord, ScoreRun or SigningKey id"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["scope", "seq"], name="eventlog_scope_seq_uniq"),
            models.UniqueConstraint(fields=["kind", "ref"], name="eventlog_kind_ref_uniq"),
        ]
        ordering = ["scope", "seq"]
        verbose_name_plural = "event log entries"


class StateRecord(AppendOnly):
    """What the application last set for a subject in a scope: a competitor's identity (slug,
    display name, model id, provider, endpoint) or a cohort's state (status, weeks, start, ...).
    Written when a subject is first sealed in a scope and by every application change after
    that; `arena verify` fails when the live row differs from the latest record."""

    class Subject(models.TextChoices):
        COMPETITOR = "competitor", "Competitor identity"
        COHORT = "cohort", "Cohort state"
        ENTRY = "entry", "Entry and its release"
        KEY = "key", "Signing key in force"

    scope = models.CharField(max_length=10, help_text="live, replay or demo")
    subject = models.CharField(max_length=12, choices=Subject.choices)
    subject_id = models.BigIntegerField()
    state = models.JSONField()
    recorded_at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["scope", "subject", "subject_id"], name="staterecord_subject_idx")
        ]
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.subject} {self.subject_id} in {self.scope} #{self.pk}"


class Checkpoint(AppendOnly):
    """A signed statement "the event log of `scope` had `size` links ending in `head` at
    `signed_at`" (format and signature: cohorts/seals/sign.py, docs/verification.md)."""

    scope = models.CharField(max_length=10)
    size = models.PositiveIntegerField()
    head = models.CharField(max_length=64)
    signed_at = models.DateTimeField()
    key_id = models.CharField(max_length=64, help_text="sha256 of the raw public key")
    signature = models.CharField(max_length=128, help_text="Ed25519, hex")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["scope", "size"], name="checkpoint_scope_size_uniq")
        ]
        ordering = ["-signed_at", "-id"]

    def __str__(self) -> str:
        return f"Checkpoint {self.scope}@{self.size} {self.head[:12]}"


class SigningKey(models.Model):
    """One key of the arena's key history (cohorts/seals/keys.py): the first key, or a rotation
    from `previous`, endorsed by the previous key's signature or explicitly unendorsed (the
    previous key was lost). Never changed or deleted."""

    key_id = models.CharField(max_length=64, unique=True, help_text="sha256 of the raw public key")
    public_key = models.CharField(max_length=64, help_text="Ed25519, raw 32 bytes, hex")
    previous = models.CharField(max_length=64, blank=True, help_text="the key id it replaced")
    endorsement = models.CharField(
        max_length=128, blank=True, help_text="the previous key's signature; blank: unendorsed"
    )
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"Key {self.key_id[:16]}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AppendOnlyError(f"SigningKey {self.pk} is append-only")
        kwargs["force_insert"] = True
        return super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnlyError(f"SigningKey {self.pk} is never deleted")


class SealPublication(models.Model):
    """One attempt history of publishing a seal to one target (not part of the sealed record)."""

    seal = models.ForeignKey(WeekSeal, on_delete=models.CASCADE, related_name="publications")
    target = models.CharField(max_length=300)
    claimed_at = models.DateTimeField()
    published_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["seal", "target"], name="publication_seal_target_uniq")
        ]
