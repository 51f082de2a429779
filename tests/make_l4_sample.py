"""Write a small synthetic file in the Yahoo! Webscope L4 (manner questions) XML format.

The real file is licence-gated, so the Yahoo pipeline is tested on this one. It mimics the
real layout (``<ystfeed><document type="wisdom">`` with uri, subject, content, bestanswer,
nbestanswers/answer_item, cat, ...; line breaks stored as escaped ``<br />``) and returns, for
each question, the number of words its generator put in the question and best answer, so tests
can check the length filter against what was generated rather than against the reader.

    python tests/make_l4_sample.py OUT.xml [--questions 300] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

TOPICS = {
    "phone": "battery charger screen phone call signal sim reset settings apps",
    "garden": "tomato soil water seeds plant sun fertilizer compost roots leaves",
    "money": "bank loan credit interest savings account budget tax income debt",
    "cook": "oven flour sugar bake recipe butter eggs pan heat minutes",
    "car": "engine oil tire brake gear clutch fuel mechanic wheel battery",
}
FILLER = ["how", "do", "i", "get", "the", "a", "to", "my", "it", "is", "you", "can", "with",
          "for", "on", "of", "and", "this", "that", "what"]


@dataclass
class Generated:
    uri: str
    question_words: int
    best_words: int | None  # None: no best answer


def _sentence(rng: random.Random, topic: str, words: int) -> str:
    vocab = TOPICS[topic].split()
    return " ".join(rng.choice(vocab) if rng.random() < 0.6 else rng.choice(FILLER)
                    for _ in range(words))


def write_l4_sample(path: Path, questions: int = 300, seed: int = 0) -> list[Generated]:
    """Write ``questions`` documents to ``path``; return what was generated for each."""
    rng = random.Random(seed)
    truth: list[Generated] = []
    parts = ['<?xml version="1.0" encoding="UTF-8"?>\n<ystfeed>\n']
    for i in range(questions):
        uri = str(100_000 + 7 * i)
        topic = rng.choice(sorted(TOPICS))
        # Mostly 3..60 words so that both ends of the 4-30 and 5-50 filters are exercised.
        q_words = rng.randint(3, 60) if rng.random() < 0.3 else rng.randint(5, 28)
        b_words = rng.randint(2, 70) if rng.random() < 0.3 else rng.randint(5, 28)
        has_best = rng.random() > 0.03
        subject = _sentence(rng, topic, q_words) + " ?"
        best = _sentence(rng, topic, b_words)
        # A line break inside the answer, stored escaped as in the real file.
        cut = best.find(" ", len(best) // 2)
        best_xml = escape(best[:cut] + " <br /> " + best[cut + 1:] + ".") if cut > 0 else best
        others = [_sentence(rng, rng.choice(sorted(TOPICS)), rng.randint(3, 40))
                  for _ in range(rng.randint(0, 3))]
        parts.append('<document type="wisdom">\n')
        parts.append(f"<uri>{uri}</uri>\n<subject>{escape(subject)}</subject>\n")
        parts.append(f"<content>{escape(_sentence(rng, topic, 12))} &amp; more</content>\n")
        if has_best:
            parts.append(f"<bestanswer>{best_xml}</bestanswer>\n")
        items = ([best_xml] if has_best else []) + [escape(o) for o in others]
        parts.append("<nbestanswers>" + "".join(f"<answer_item>{a}</answer_item>" for a in items)
                     + "</nbestanswers>\n")
        parts.append(f"<cat>{topic}</cat>\n<maincat>{topic}</maincat>\n<qlang>en</qlang>\n")
        parts.append("</document>\n")
        truth.append(Generated(uri, q_words, b_words if has_best else None))
    parts.append("</ystfeed>\n")
    path.write_text("".join(parts), encoding="utf-8")
    return truth


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    write_l4_sample(args.out, args.questions, args.seed)
