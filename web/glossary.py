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


TERMS: tuple[Term, ...] = (
    Term(
        "rank",
        "Rank",
        "Position by the headline metric: skill vs market when the group has resolved forecasts "
        "with a market price, otherwise return. Only scored competitors get a rank.",
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
        "Mean squared error of the stated probabilities against what happened (1 for the "
        "outcome that occurred, 0 otherwise), 0 is perfect, 0.25 is always saying 50%. Lower "
        "is better. Each stated outcome of a multi-outcome market is scored one-vs-rest.",
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
        "Brier score of the market price the competitor saw at decision time minus the "
        "competitor's own Brier score, on the same forecasts. Positive: its probabilities beat "
        "the market's; negative: the market was better. Zero is what copying the price scores.",
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
        "Brier skill vs always 0.5",
        "1 - Brier(competitor) / 0.25: skill against someone who always says 50%.",
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
        "Percentile bootstrap interval: markets are resampled with the same draws for every "
        "competitor (return intervals resample entries). An interval that contains zero means "
        "the sign itself is uncertain, and the ends keep their sign on the page for that reason.",
    ),
    Term(
        "return",
        "Return",
        "Portfolio value over the starting balance, minus 1, in percent: marked to market at "
        "the latest snapshot.",
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
        "Settled positions that won, over settled positions that won or lost (void and sold "
        "positions are not counted).",
    ),
    Term(
        "resolved",
        "Resolved",
        "Questions whose market has resolved (and so can be scored), over all questions the "
        "competitor forecast.",
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
        "GENUINE_EDGE, WEAK_EDGE or NO_EDGE from a bootstrap of the closing-line-value Sharpe "
        "ratio: a one-sided p-value, Holm-adjusted across the competitors of the leaderboard, "
        "genuine at the stricter level, weak at the looser one. A label within Monte Carlo "
        "error of a level is the weaker one, marked borderline.",
    ),
    Term(
        "tournament",
        "Tournament take",
        "A Metaculus-style tournament against the market: each question scores the log of the "
        "competitor's probability over the market's, averaged over the question's life; take = "
        "mean coverage x e^(sum of question scores).",
    ),
    Term(
        "coverage",
        "Coverage",
        "The share of a question's life during which the competitor had a forecast standing.",
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
