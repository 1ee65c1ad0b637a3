"""The seals: what makes a week's decisions, and everything scored from them, provable later.

docs/verification.md is the outsider's description (enough to re-implement a verifier).
Modules, bottom up:

    models     the append-only rows (WeekSeal, DecisionDigest, EventLogEntry, checkpoints,
               publications); imported by cohorts.models so they keep the cohorts app label
    canonical  canonical JSON (RFC 8785), the record and link hashes, the fixed forms
    records    what each record holds (decision, pending, genesis, resolution, settlement)
    sign       the Ed25519 key and the signed checkpoints of each log
    events     the event log, one chain per scope: week roots, resolutions, settlements,
               reversals, identities and cohort states
    state      the states the scores rest on besides the decisions: competitor identities
               and cohort states, recorded in the log
    sealing    the policy: when a week is sealed or amended, and what a root covers
    publish    posting roots and checkpoints outside the arena
    checks     `arena verify`'s comparison of the live state with a scope's event log
    published  `arena verify --published`: saved roots, heads and checkpoints against today's
    export     the export an outsider verifies
    workers    `arena verify` on both cores, one process per group of cohorts
    verify     `arena verify`, built on all of the above; cli: its arguments and exit code

May import: core, markets, agents, and cohorts' own root modules (models, scope, universe,
llm_calls). Never the decision run or the chart series, which call into it.
"""
