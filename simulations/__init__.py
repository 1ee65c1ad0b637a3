"""Simulations: whole competitions driven on a simulated clock through the real services.

replay (real ForecastBench question sets) and demo (a seeded synthetic world) open cohorts, freeze
universes, run decisions, settle and score exactly as live does, under their own cohort kind so
their results are labelled and never mixed with live ones. This package sits above markets,
agents, cohorts and scoring, and nothing below imports it.
"""
