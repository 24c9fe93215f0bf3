"""Feedback-in-words benchmark: agreement of ``reward_from_text`` with labelled feedback to an agent.

The labelled set below (written for this benchmark: 150 sentences a user might send an
agent about its work, 50 positive, 50 negative, 50 neutral; with negations such as "not
bad", "didn't work", "no errors", hedges, contrasts, and no sarcasm) is scored by:

* ``vader+domain``: what engramdb uses (VADER's compound score with the domain words of
  :data:`engramdb.brain.sentiment.DOMAIN_LEXICON`);
* ``vader``: plain VADER, to show what the domain words add;
* ``keywords``: a trivial baseline, (positive words - negative words) / all matched words,
  from two short word lists, with no negation handling.

Reported: 3-class accuracy (a reward within (-0.05, 0.05) counts as neutral, VADER's
convention), accuracy on the polar sentences alone (sign agreement), macro-F1, and Pearson
and Spearman correlation of the reward with the label (+1 / 0 / -1). Caveat: the domain
lexicon was written before this set, by the same author; a set written by someone else
would be a fairer test.

    python bench/feedback.py      # prints the table, writes bench/results/feedback.json
"""

from __future__ import annotations

import json
import platform
import re
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table
from scipy.stats import pearsonr, spearmanr

RESULTS_DIR = Path(__file__).resolve().parent / "results"

POSITIVE = [
    "Great job, that's exactly what I wanted.",
    "Perfect, thanks!",
    "This works now, thank you.",
    "Nice, the tests pass.",
    "Not bad at all.",
    "LGTM, merged.",
    "You nailed it.",
    "That fixed the bug, great work.",
    "Excellent refactor, much cleaner.",
    "Thanks, that was really helpful.",
    "Works like a charm.",
    "The migration ran without a single error, well done.",
    "Good call on adding the retry.",
    "Love the new summary format.",
    "Yes, that's correct.",
    "That's right, ship it.",
    "Awesome, the build is green again.",
    "This is much faster than before, nice.",
    "I like this approach a lot.",
    "Spot on, the numbers match the report.",
    "The fix worked on the first try.",
    "Thanks for catching that edge case!",
    "Clear and concise explanation, thank you.",
    "Good, the deploy succeeded.",
    "That's a clever solution.",
    "Brilliant, it handles the empty list too.",
    "Exactly right.",
    "The answer was accurate and well sourced.",
    "Impressive, you found the root cause quickly.",
    "No complaints, it does what I asked.",
    "It didn't break anything, great.",
    "Much better than the previous version.",
    "Super useful, saved me an hour.",
    "The code is clean and easy to read.",
    "Wonderful, the customer is happy.",
    "Thank you, the query now returns the right rows.",
    "Solid work on the test coverage.",
    "That's what I needed, cheers.",
    "Great, no more timeouts.",
    "Looks good to me.",
    "Well done, the PR is approved.",
    "Yes! The page loads instantly now.",
    "Beautiful chart, exactly the style I like.",
    "Correct answer, and nicely explained.",
    "This is a big improvement, thank you.",
    "The summary was thorough and accurate.",
    "Fantastic, all 42 tests passed.",
    "Good catch on the off-by-one error.",
    "It works perfectly with the new API.",
    "I'm happy with this result.",
]
NEGATIVE = [
    "This is wrong.",
    "That did not work.",
    "The tests still fail.",
    "It crashed again.",
    "You hallucinated that API, it doesn't exist.",
    "No, that's not what I asked for.",
    "The build is broken now.",
    "This made it worse.",
    "Terrible answer.",
    "It doesn't compile.",
    "You deleted the wrong file!",
    "The numbers are incorrect.",
    "That's useless, please start over.",
    "Still getting the same error.",
    "The fix introduced a regression in the login flow.",
    "Please revert this change.",
    "Way too slow, the request times out.",
    "The summary missed the main point.",
    "I'm disappointed, this ignores my instructions.",
    "Bad idea, it breaks backwards compatibility.",
    "This is buggy.",
    "The output is garbage.",
    "Not good enough.",
    "That's not correct.",
    "It doesn't work on Windows.",
    "You keep making the same mistake.",
    "The query returns duplicate rows, wrong again.",
    "Ugh, the formatting is a mess.",
    "This code is sloppy and hard to read.",
    "The deploy failed.",
    "Nope, still broken.",
    "The chart is confusing and the labels are wrong.",
    "You ignored the style guide.",
    "This is overcomplicated for such a simple task.",
    "I asked for Python, not JavaScript. Wrong language.",
    "The tests are flaky now.",
    "It leaks memory under load.",
    "The answer is outdated, that function was removed.",
    "That broke production.",
    "Awful, it wiped my config.",
    "The script throws an exception on empty input.",
    "You forgot the error handling, again.",
    "This is unusable.",
    "Wrong branch, you pushed to main.",
    "The translation is inaccurate.",
    "Not helpful at all.",
    "That's a security hole, the password is logged in plain text.",
    "The fix didn't solve anything.",
    "I hate this layout.",
    "It failed with a traceback.",
]
NEUTRAL = [
    "I will look at it tomorrow.",
    "Can you also add a docstring?",
    "Use tabs instead of spaces.",
    "Run it on the staging server next.",
    "What version of Python is this for?",
    "The file is in the docs folder.",
    "Let's move on to the next ticket.",
    "Please rename the variable to user_id.",
    "I'm going to test it later.",
    "Which database does this use?",
    "Add a flag for the output path.",
    "The meeting is at three.",
    "Next, write the README section.",
    "Make the timeout configurable.",
    "Show me the diff.",
    "Send the report to the team channel.",
    "Can you explain how the cache works?",
    "Use the v2 endpoint for this one.",
    "We'll decide on the design on Monday.",
    "Split it into two functions.",
    "Keep the log level at info.",
    "The customer asked for a CSV export.",
    "Now do the same for the orders table.",
    "Put the constants in a separate module.",
    "Let me check with the team first.",
    "The deadline is Friday.",
    "Try it with the production config.",
    "How long does the job usually take?",
    "Write the tests in pytest.",
    "Switch the chart to a bar chart.",
    "Here is the stack trace from the server.",
    "The input file has 3,000 rows.",
    "Add the ticket number to the commit message.",
    "Continue with step two.",
    "Can you summarise the thread?",
    "I changed the config myself.",
    "Use the same format as last week.",
    "Where is the retry logic defined?",
    "Translate it into German.",
    "Check the logs from last night.",
    "The API key is in the vault.",
    "We use PostgreSQL 16.",
    "Please wait for my review.",
    "Make it a draft pull request.",
    "Can you list the open issues?",
    "The user is in the Berlin office.",
    "Keep the function signature as it is.",
    "Schedule it for after the release.",
    "Add a comment explaining the regex.",
    "Group the results by month.",
]
LABELLED: list[tuple[str, int]] = [(t, 1) for t in POSITIVE] + [(t, -1) for t in NEGATIVE] + [(t, 0) for t in NEUTRAL]

#: The keyword baseline's lists (a plausible first attempt, no negation handling).
POS_WORDS = {
    "good", "great", "thanks", "thank", "perfect", "works", "worked", "nice", "excellent", "correct", "right",
    "love", "awesome", "helpful", "fixed", "well", "happy", "clean", "better", "lgtm", "yes",
}  # fmt: skip
NEG_WORDS = {
    "bad", "wrong", "fail", "failed", "fails", "error", "broken", "broke", "crash", "crashed", "bug", "buggy",
    "incorrect", "useless", "worse", "terrible", "awful", "slow", "no", "not", "hate", "mess",
}  # fmt: skip


def keyword_reward(text: str) -> float:
    words = re.findall(r"[a-z']+", text.lower())
    pos = sum(w in POS_WORDS for w in words)
    neg = sum(w in NEG_WORDS for w in words)
    return 0.0 if pos + neg == 0 else (pos - neg) / (pos + neg)


def vader_plain() -> Callable[[str], float]:
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer  # type: ignore[import-untyped]

    analyzer = SentimentIntensityAnalyzer()
    return lambda text: float(analyzer.polarity_scores(text)["compound"])


def label_of(reward: float, band: float = 0.05) -> int:
    return 0 if -band < reward < band else (1 if reward > 0 else -1)


def score(scorer: Callable[[str], float], data: Sequence[tuple[str, int]]) -> dict[str, Any]:
    rewards = np.array([scorer(t) for t, _ in data])
    labels = np.array([y for _, y in data])
    predicted = np.array([label_of(r) for r in rewards])
    polar = labels != 0
    f1s = []
    for c in (-1, 0, 1):
        tp = int(np.sum((predicted == c) & (labels == c)))
        fp = int(np.sum((predicted == c) & (labels != c)))
        fn = int(np.sum((predicted != c) & (labels == c)))
        f1s.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    errors = [(t, y, round(float(r), 3)) for (t, y), r, p in zip(data, rewards, predicted, strict=True) if p != y]
    return {
        "accuracy": float(np.mean(predicted == labels)),
        "polar_sign_accuracy": float(np.mean(np.sign(rewards[polar]) == labels[polar])),
        "macro_f1": float(np.mean(f1s)),
        "pearson": float(pearsonr(rewards, labels)[0]),
        "spearman": float(spearmanr(rewards, labels)[0]),
        "per_class_accuracy": {
            name: float(np.mean(predicted[labels == c] == c))
            for name, c in (("positive", 1), ("neutral", 0), ("negative", -1))
        },
        "errors": errors,
    }


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from engramdb.brain.sentiment import lexicon_reward

    systems: dict[str, Callable[[str], float]] = {
        "vader+domain (engramdb)": lexicon_reward,
        "vader": vader_plain(),
        "keywords (baseline)": keyword_reward,
    }
    results = {name: score(fn, LABELLED) for name, fn in systems.items()}
    table = Table(title=f"Feedback in words: {len(LABELLED)} labelled sentences (50 pos / 50 neg / 50 neutral)")
    for col in ("scorer", "accuracy", "polar sign acc.", "macro-F1", "Pearson r", "Spearman ρ", "pos / neu / neg acc."):
        table.add_column(col, justify="right" if col != "scorer" else "left")
    for name, r in results.items():
        pc = r["per_class_accuracy"]
        table.add_row(
            name,
            f"{r['accuracy']:.1%}",
            f"{r['polar_sign_accuracy']:.1%}",
            f"{r['macro_f1']:.3f}",
            f"{r['pearson']:.3f}",
            f"{r['spearman']:.3f}",
            f"{pc['positive']:.0%} / {pc['neutral']:.0%} / {pc['negative']:.0%}",
        )
    Console(width=130).print(table)
    RESULTS_DIR.mkdir(exist_ok=True)
    out = {
        "benchmark": "feedback",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "sentences": len(LABELLED),
        "neutral_band": 0.05,
        "results": results,
    }
    (RESULTS_DIR / "feedback.json").write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
