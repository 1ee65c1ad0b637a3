"""The ground floor: primitives every other package may use, and that import no project package.

http (Retry-After parsing for outbound clients), versions (data/scores version tokens that caches
key on), jobs + models (JobRun records of periodic jobs), progress (terminal progress bars), and
methodology (the frozen scoring constants). Nothing here knows about markets, cohorts or pages.
"""
