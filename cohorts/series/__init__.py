"""The chart series: every entry's and every scope's values on fixed grids, kept up to date as
snapshots are written, so no page computes a series on a read.

Modules, bottom up:

    grid      the grid, its packing, and the models a migration can stand in for
    rebuild   recomputing entries from their snapshot rows
    overview  the per-scope, per-competitor growth factors the home chart compounds
    chart     the home chart compounded from them (its default range stored on write), and
              the reads the site's chart pages make
    write     what writers call: record(), the locks, rebuilds after settlements and deletions

May import: core, markets, agents and cohorts.models. The snapshot writer, settlement and the
receivers (cohorts' root modules) call into it; it calls none of them.
"""
