"""`arena rehearse`: the live path run end to end on an accelerated clock (docs/rehearsal.md).

Modules, bottom up:

    procs   the arena's own processes (gunicorn, Celery workers, beat, a private redis-server)
    http    what a rehearsal does over HTTP as outsiders would: /healthz polls, staff
            corrections through the admin's login form, saving /api/seals
    faults  the fault schedule and its injection
    checks  what a rehearsal must show at the end
    run     the orchestrator: plan, start, inject, correct, check
    cli     its arguments

May import every floor below simulations; the site (web) only through HTTP.
"""
