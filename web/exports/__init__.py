"""The exports: every row a page's figures rest on, as bounded CSV or JSON files.

`/exports/<what>.<csv|json>` and `arena export` read the same streams. Modules, bottom up:

    text    how a value is written (numbers positionally, CSV cells defused, JSON plain)
    specs   what each export holds: its rows, columns and date column
    gate    who may read one now: slots per web process and client network, the file cache
    files   bounds, the row streams and the export view
    door    the middleware that refuses a busy export before the rest of the stack runs

May import: core, markets, agents, cohorts, scoring, and web's own params and standings.
The pages and the API link here; nothing here imports them.
"""
