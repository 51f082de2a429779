"""Built-in synthetic data: learnable by a working model, not by a broken one.

Two seeded generators, both returning the canonical pair table
(``pair_id, group_id, left, right, label``):

* :func:`generate_nli` — 3-class NLI (0 entailment, 1 neutral, 2 contradiction).
  The label depends on how the hypothesis relates to the premise, word by word:
  a hypernym or a dropped adjective entails; a swapped noun of the same
  category, an antonym verb or a negation contradicts; an added detail is
  neutral. A model that looks at one sentence only stays near chance on the
  noun-swap and detail cases; a model that never sees the premise cannot
  exceed about 50%.
* :func:`generate_ranking` — queries with one relevant candidate and
  ``negatives`` distractors. The relevant one mentions the query's topic words
  (or their synonyms); distractors share filler words and at most one topic word.
"""

from __future__ import annotations

import random

import pandas as pd

NLI_LABELS = ["entailment", "neutral", "contradiction"]

# noun -> (category, hypernym)
NOUNS = {
    "dog": ("animal", "animal"), "cat": ("animal", "animal"), "horse": ("animal", "animal"),
    "bird": ("animal", "animal"), "man": ("person", "person"), "woman": ("person", "person"),
    "boy": ("person", "child"), "girl": ("person", "child"), "car": ("vehicle", "vehicle"),
    "bike": ("vehicle", "vehicle"), "truck": ("vehicle", "vehicle"), "boat": ("vehicle", "vehicle"),
}
VERBS = {  # verb -> antonym
    "runs": "sits", "sits": "runs", "sleeps": "wakes", "wakes": "sleeps", "stands": "lies",
    "lies": "stands", "eats": "starves", "starves": "eats", "moves": "stops", "stops": "moves",
}
ADJECTIVES = ["small", "big", "red", "old", "young", "happy", "dirty", "fast", "green", "quiet"]
PLACES = ["park", "street", "beach", "field", "garden", "road", "river", "city"]
DETAILS = ["because it is late", "for the first time", "with a friend", "during the storm",
           "after lunch", "near the station"]


def _premise(rng: random.Random) -> tuple[str, str, str, str]:
    noun = rng.choice(sorted(NOUNS))
    verb = rng.choice(sorted(VERBS))
    adjective = rng.choice(ADJECTIVES)
    place = rng.choice(PLACES)
    return adjective, noun, verb, place


def _nli_pair(rng: random.Random) -> tuple[str, str, int]:
    adjective, noun, verb, place = _premise(rng)
    premise = f"a {adjective} {noun} {verb} in the {place}"
    label = rng.randrange(3)
    if label == 0:  # entailment
        if rng.random() < 0.5:
            hypothesis = f"a {NOUNS[noun][1]} {verb} in the {place}"
        else:
            hypothesis = f"a {noun} {verb} in the {place}"
    elif label == 1:  # neutral: an added detail, or an adjective the premise does not give
        if rng.random() < 0.5:
            hypothesis = f"a {adjective} {noun} {verb} in the {place} {rng.choice(DETAILS)}"
        else:
            other_adj = rng.choice([a for a in ADJECTIVES if a != adjective])
            hypothesis = f"a {other_adj} {noun} {verb} in the {place}"
    else:  # contradiction: same-category noun swap, antonym verb, or negation
        kind = rng.randrange(3)
        if kind == 0:
            others = [n for n, (c, _) in NOUNS.items() if c == NOUNS[noun][0] and n != noun]
            hypothesis = f"a {adjective} {rng.choice(sorted(others))} {verb} in the {place}"
        elif kind == 1:
            hypothesis = f"a {adjective} {noun} {VERBS[verb]} in the {place}"
        else:
            hypothesis = f"no {noun} {verb} in the {place}"
    return premise, hypothesis, label


def generate_nli(n_pairs: int, seed: int = 0, split: str = "train") -> pd.DataFrame:
    """``n_pairs`` seeded NLI pairs as a canonical pair table (label = class index)."""
    rng = random.Random(f"nli-{seed}-{split}")
    rows = []
    for i in range(n_pairs):
        premise, hypothesis, label = _nli_pair(rng)
        pair_id = f"{split}-{i}"
        rows.append((pair_id, pair_id, premise, hypothesis, label))
    return pd.DataFrame(rows, columns=["pair_id", "group_id", "left", "right", "label"])


TOPICS = {  # topic word -> synonyms used by relevant answers
    "oven": ["oven", "stove"], "garden": ["garden", "yard"], "printer": ["printer", "printing"],
    "passport": ["passport", "visa"], "guitar": ["guitar", "strings"], "bread": ["bread", "dough"],
    "tire": ["tire", "wheel"], "email": ["email", "inbox"], "paint": ["paint", "brush"],
    "budget": ["budget", "savings"], "fever": ["fever", "temperature"], "tent": ["tent", "camping"],
    "laptop": ["laptop", "battery"], "fish": ["fish", "aquarium"], "coffee": ["coffee", "beans"],
    "roof": ["roof", "shingles"],
}
ACTIONS = ["fix", "clean", "start", "choose", "improve", "protect", "replace", "check"]
FILLER = ["you", "should", "first", "then", "carefully", "try", "the", "a", "it", "and", "always",
          "make", "sure", "with", "some", "good", "simple", "way", "to", "is"]


def _answer(rng: random.Random, topic_words: list[str], length: int) -> str:
    words = [rng.choice(FILLER) for _ in range(length)]
    for word in topic_words:
        words.insert(rng.randrange(len(words) + 1), word)
    return " ".join(words)


def generate_ranking(
    n_queries: int, negatives: int = 4, seed: int = 0, split: str = "train"
) -> pd.DataFrame:
    """Ranking groups: each query has 1 relevant candidate (label 1) and ``negatives`` others."""
    rng = random.Random(f"rank-{seed}-{split}")
    topics = sorted(TOPICS)
    rows = []
    for q in range(n_queries):
        topic, second = rng.sample(topics, 2)
        action = rng.choice(ACTIONS)
        query = f"how do i {action} my {topic} and {second}"
        group = f"{split}-q{q}"
        candidates = [(
            _answer(rng, [rng.choice(TOPICS[topic]), rng.choice(TOPICS[second]), action],
                    rng.randint(4, 9)),
            1,
        )]
        for _ in range(negatives):
            # a distractor shares at most one topic word with the query
            others = rng.sample([t for t in topics if t not in (topic, second)], 2)
            shared = [rng.choice(TOPICS[rng.choice([topic, second])])] if rng.random() < 0.5 else []
            words = [*shared, rng.choice(TOPICS[others[0]]), rng.choice(ACTIONS)]
            candidates.append((_answer(rng, words, rng.randint(4, 9)), 0))
        rng.shuffle(candidates)
        for c, (text, label) in enumerate(candidates):
            rows.append((f"{group}-a{c}", group, query, text, label))
    return pd.DataFrame(rows, columns=["pair_id", "group_id", "left", "right", "label"])
