"""The weekly decision run: one claimed Decision row per entry and week, fully audited.

Modules, bottom up:

    retry   the retry policy for a round whose model calls all failed on a provider outage
    claims  the Decision row as the claim: claiming, reclaiming a stale claim, keeping it
    room    fitting a model's prompt to its context before it is sent
    run     decide() and run_decision(): claim, prompt, model or baseline, parse, repair, the
            one transaction that records forecasts, trades and ledger rows, then the seal
    tasks   the Celery tasks that carry decisions to the workers (registered by cohorts.tasks)
    admin   the decision audit in the admin, and staff re-runs
    cli     `arena decide`

May import: core, markets, agents, cohorts' root modules (models, services, scope, universe,
lineage, llm_calls, correction_impact) and cohorts.seals.sealing (a final decision seals its week).
LLM-call records (cohorts/llm_calls.py) sit below this package because the seal's decision record
publishes them too: were they here, the seals and the decision run would import each other.
"""
