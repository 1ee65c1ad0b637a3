"""What every technical figure on the site means, in one place.

The methodology page prints these in order, each with an anchor (#g-<key>); column headers and
labels elsewhere link to their entry with the `term` template tag, which refuses an unknown key,
so a header can never point at a missing definition.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    key: str
    title: str
    text: str
    # The rule the text states, by name, where it is a formula a reader can recompute:
    # tests/scoring/test_published_spec.py recomputes each named formula on the demo's
    # exports as the text writes it and compares it with the published figure, so a text and
    # the code cannot say two things. None: a definition with no figure of its own.
    formula: str | None = None


TERMS: tuple[Term, ...] = (
    Term(
        "rank",
        "Rank",
        "Position by the headline metric: skill vs market when the group has resolved forecasts "
        "with a market price, otherwise pooled return. Each competitor is ranked on the "
        "questions it forecast itself (its coverage stands beside it); the common-question view "
        "is published beside the ranking and does not rank. Only scored competitors get a rank.",
    ),
    Term(
        "group",
        "Group letters",
        "Each ranked competitor gets one or more letters from the paired Diebold-Mariano tests "
        "(Brier loss on the questions both forecast, each pair judged at the Bonferroni level: "
        "5% divided by the number of pairs). Two competitors that share a letter are not "
        "significantly different; two with no letter in common are. A competitor can carry "
        'several letters ("ab") when it cannot be told apart from rows that differ from each '
        "other, so rows sharing a letter are a statistical tie, whatever their ranks say.",
    ),
    Term(
        "brier",
        "Brier score",
        "Mean over the competitor's scored questions of each question's Brier: half the sum, "
        "over the market's K outcomes, of (p_k - o_k)^2, with o_k 1 for the outcome that "
        "occurred and 0 otherwise, from the probability vector the decision stated (outcomes "
        "it left out share the rest like the prices it was shown). A multi-outcome market is "
        "scored once per question, not once per outcome; for a yes/no market this is "
        "(p - o)^2. 0 is perfect, 0.25 is always saying 50% on yes/no. Lower is better.",
        formula="brier:question_half_sum",
    ),
    Term(
        "brier_points",
        "Brier points",
        "Differences of Brier scores are small numbers; the leaderboard prints enough decimals "
        "to tell neighbouring rows apart, so 0.0012 means 0.0012 Brier, never a rounded 0.001.",
    ),
    Term(
        "skill",
        "Skill vs market",
        "Mean over the competitor's scored questions that have a market price of (the market's "
        "question Brier - the competitor's question Brier), the market being the prices the "
        "competitor was shown at the decision, completed like a forecast. Positive: its "
        "probabilities beat the market's; negative: the market was better. Zero is what "
        "copying the price scores.",
        formula="skill:mean_difference",
    ),
    Term(
        "bss_ratio",
        "Brier skill score vs market (ratio)",
        "1 - Brier(competitor) / Brier(market) over the same forecasts: the same comparison as "
        "skill vs market, expressed as a fraction of the market's error instead of a "
        "difference. It has the sign of skill vs market but not its size.",
    ),
    Term(
        "bss_half",
        "Brier skill vs the uniform forecast (1/K)",
        "1 - (sum of the competitor's question Briers) / (sum of the uniform forecast's), over "
        "the same scored questions. The uniform forecast gives each of a market's K outcomes "
        "1/K, so its question Brier is (1 - 1/K) / 2: 0.25 on a yes/no market (always 50%), "
        "1/3 on a three-outcome one.",
        formula="bss_half:uniform_1_over_k",
    ),
    Term(
        "log_score",
        "Log score",
        "Mean negative natural log of the probability given to what happened (probabilities "
        "clipped away from 0 and 1). Lower is better; it punishes confident misses much harder "
        "than Brier does.",
    ),
    Term(
        "ci",
        "95% interval",
        "Percentile bootstrap interval (2.5th and 97.5th percentiles of 2,000 resamples, "
        "numpy's linear rule) that resamples markets, never entries or forecasts: one resample "
        "draws, with replacement, as many markets as the set holds, the same draws for every "
        "competitor. Brier and skill intervals draw from the markets of the group's scored "
        "questions, every question of a drawn market counting as often as it is drawn; return "
        "intervals draw from the markets any competitor of the group traded (not only the "
        "competitor's own), a drawn market adding the competitor's P/L on it. An interval that "
        "contains zero means the sign itself is uncertain, and the ends keep their sign on the "
        "page for that reason.",
        formula="ci:market_union",
    ),
    Term(
        "return",
        "Pooled return",
        "The competitor's P/L summed over all its entries in the group, over their summed "
        "starting cash, in percent: every entry's value marked to market at its latest snapshot "
        "at or before the score time. The leaderboard's and the competitor page's return; not "
        "the chain-linked growth the home chart draws.",
        formula="return:pooled",
    ),
    Term(
        "growth",
        "Chain-linked growth",
        "What the home chart draws: from one point to the next each competitor's line moves by "
        "the average growth of its entries running over that step, so a new entry opening at "
        "0% does not pull the line down; the return of holding all its entries in equal parts. "
        "It differs from the pooled return when entries of different ages did differently.",
    ),
    Term(
        "pnl",
        "P/L",
        "Profit or loss in dollars: realized (sales and settlements) plus unrealized (open "
        "positions marked at the current price).",
    ),
    Term(
        "win_rate",
        "Win rate",
        "Bets that won over bets on resolved markets: every BUY trade on a market resolved by "
        "the score time counts once (void markets left out), whether or not it averaged into a "
        "position with other bets. Settled positions are counted apart on the competitor page.",
        formula="win_rate:bets",
    ),
    Term(
        "resolved",
        "Scored",
        "Forecasts the competitor made whose market resolved to a listed outcome by the score "
        "time (and so were scored), of all its forecasts. A forecast is one decision's "
        "probabilities for one market (a question): a multi-outcome market counts once, however "
        "many of its outcomes were stated.",
        formula="resolved:questions",
    ),
    Term(
        "coverage",
        "Coverage",
        "Of the questions the scope asked the competitor (each week's forecast sample, once per "
        "decision of its entries, whatever became of the decision) whose market resolved, how "
        "many it gave a scored forecast: 'scored / asked'. Forecasts outside the sample (markets "
        "it chose to bet on) are scored but do not count here.",
        formula="coverage:asked_sample",
    ),
    Term(
        "common_set",
        "Common questions",
        "Every competitor of a group scored on the same questions: the resolved markets of the "
        "weeks' forecast samples, once per cohort and week. A missing forecast (skipped, failed, "
        "no entry that week) is imputed as the price the week's market list showed, which "
        "scores exactly 0 skill; the market reference is that price for everyone. Replicates "
        "are averaged. Published beside the ranking; it does not rank.",
        formula="common:shown_price",
    ),
    Term(
        "cost",
        "Cost",
        "What the competitor's model calls cost in US dollars, as the provider reported it. "
        "Baselines call no model and cost nothing.",
    ),
    Term(
        "provisional",
        "Provisional",
        "Too few resolved questions for the score to mean much yet: the methodology fixes how "
        "many resolved questions it takes to detect a 0.02 difference in Brier score, and every "
        "row with fewer is marked provisional by the same rule.",
    ),
    Term(
        "unscored",
        "Not scored yet",
        "A competitor with no headline number (no resolved forecast, or no decision at all) is "
        "listed apart, without a rank: it has not lost, it has not played.",
    ),
    Term(
        "clock",
        "Scored as of / simulated clock",
        "Live scores are computed as of a real time. Replay and demo cohorts run on a simulated "
        "clock (a replay's clock follows the dates of the historical questions), so their scores "
        "are as of a simulated time, which is not today's date.",
    ),
    Term(
        "dm",
        "Diebold-Mariano test",
        "A paired test of whether two competitors' mean losses differ, on the forecasts both "
        "made, with an autocorrelation-robust variance. The significance level is divided by "
        "the number of pairs (Bonferroni), so a 'better' verdict survives looking at every pair.",
    ),
    Term(
        "reliability",
        "Reliability diagram",
        "Forecasts grouped into probability bins: the mean stated probability of each bin "
        "against how often the outcome happened. A calibrated forecaster lies on the diagonal.",
    ),
    Term(
        "ece",
        "Expected calibration error",
        "The bins' average distance from the diagonal of the reliability diagram, weighted by "
        "how many forecasts each bin holds. 0 is perfectly calibrated.",
    ),
    Term(
        "murphy",
        "Murphy decomposition",
        "Brier = reliability (calibration error, lower is better) - resolution (how much the "
        "forecasts separate outcomes, higher is better) + uncertainty (how hard the questions "
        "were, the same for everyone), plus two small within-bin terms.",
    ),
    Term(
        "clv",
        "Closing line value",
        "For each bet, the market's closing price minus the price paid (as a probability, and "
        "in log-odds): a bettor whose prices keep moving their way after they bet has an edge "
        "the market later agreed with. 'n/a' where the market has no closing price.",
    ),
    Term(
        "edge_label",
        "Edge label",
        "A statement about closing-line value only, not about skill or return. GENUINE_EDGE, "
        "WEAK_EDGE or NO_EDGE from a stationary bootstrap (20,000 resamples) of the CLV Sharpe "
        "ratio: a one-sided p-value, Holm-adjusted across the competitors of the group with a "
        "tested series, genuine at adjusted p <= 0.025, weak at <= 0.05; the p shown beside a "
        "label is that adjusted one. NOT_TESTED when there are fewer than 10 trades with a "
        "closing line or no variance: too few to judge, which is not 'no edge'. n/a without a "
        "single closing line. Another random seed moves a p-value by about its Monte Carlo "
        "error, sqrt(p(1 - p)/20,000), 0.0011 near 0.025: the label is taken at p plus 3 such "
        "errors and marked borderline when p minus 3 would give another, so two seeds can give "
        "two different firm labels only if a p-value moves by more than 6 errors.",
        formula="edge_label:holm_clv",
    ),
    Term(
        "tournament",
        "Tournament take",
        "A Metaculus-style tournament against the market: each question scores the log of the "
        "competitor's probability over the market's, averaged over the question's life; take = "
        "time coverage x e^(sum of question scores).",
    ),
    Term(
        "time_coverage",
        "Time coverage",
        "In the tournament: the mean over its questions of the share of each question's "
        "scheduled life during which the competitor had a forecast standing.",
    ),
    Term(
        "prize_share",
        "Prize share",
        "The competitor's take over the sum of all takes: how a prize pool would be split "
        "among the competitors in that tournament.",
    ),
    Term(
        "champions_clothes",
        "Champion's clothes",
        "The competitor's own probabilities traded by one standard trading layer (fractional "
        "Kelly stakes, the same budget rules) instead of its own bets. It separates being "
        "right from betting well: a good forecaster with poor bets does better here.",
    ),
    Term(
        "implied_confidence",
        "Implied-confidence Brier",
        "A diagnostic that reads each bet as a statement of confidence in the side bought. It "
        "is not a proper score and never ranks anyone.",
    ),
    Term(
        "value",
        "Value",
        "Cash plus open positions marked to market at the latest 10-minute snapshot; before "
        "the first snapshot, cash plus positions at cost (marked 'at cost').",
    ),
    Term(
        "invested",
        "Invested",
        "Cost basis of the positions still open.",
    ),
    Term(
        "correction",
        "Staff correction",
        "A market's resolution changed by staff (re-resolved, voided or reopened), with a "
        "reason in the market's audit trail. The earlier settlement is reversed through the "
        "ledger and every figure is recomputed at once; charts mark the moment with a line.",
    ),
)

INDEX: dict[str, Term] = {t.key: t for t in TERMS}
