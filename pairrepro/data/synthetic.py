"""Built-in synthetic data, seeded: learnable by a working model that compares the two texts,
not by one that reads only one of them (a hypothesis-only classifier stays near chance)."""

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


def _nli_pair(rng: random.Random) -> tuple[str, str, int]:
    noun, verb = rng.choice(sorted(NOUNS)), rng.choice(sorted(VERBS))
    adjective, place = rng.choice(ADJECTIVES), rng.choice(PLACES)
    premise = f"a {adjective} {noun} {verb} in the {place}"
    label = rng.randrange(3)
    other_adjective = rng.choice([a for a in ADJECTIVES if a != adjective])
    # noun of the hypothesis: the same one or its hypernym. The odds are set so that a
    # specific (non-hypernym) noun is equally likely (3/4) under every label.
    same_or_hypernym = noun if rng.random() < 0.75 else NOUNS[noun][1]
    if label == 0:  # entailment: nothing new is claimed
        h_adj, h_noun, h_verb = adjective, same_or_hypernym, verb
    elif label == 1:  # neutral: an adjective the premise does not give
        h_adj, h_noun, h_verb = other_adjective, same_or_hypernym, verb
    else:  # contradiction: a sibling noun or the antonym verb
        h_adj = rng.choice([adjective, other_adjective])
        if rng.random() < 0.5:
            siblings = [n for n, (c, _) in NOUNS.items() if c == NOUNS[noun][0] and n != noun]
            h_noun, h_verb = rng.choice(sorted(siblings)), verb
        else:
            h_noun = noun if rng.random() < 0.5 else NOUNS[noun][1]
            h_verb = VERBS[verb]
    return premise, f"a {h_adj} {h_noun} {h_verb} in the {place}", label


def generate_nli(n_pairs: int, seed: int = 0, split: str = "train") -> pd.DataFrame:
    """``n_pairs`` NLI pairs: the label is the relation between the texts (hypernym entails,
    another adjective is neutral, a sibling noun or antonym verb contradicts)."""
    rng = random.Random(f"nli-{seed}-{split}")
    rows = [(f"{split}-{i}", f"{split}-{i}", *_nli_pair(rng)) for i in range(n_pairs)]
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


def generate_ranking(n_queries: int, negatives: int = 4, seed: int = 0,
                     split: str = "train") -> pd.DataFrame:
    """Ranking groups: one relevant candidate with the query's topic words or synonyms, and
    ``negatives`` distractors with at most one of them."""
    rng = random.Random(f"rank-{seed}-{split}")
    topics = sorted(TOPICS)
    rows = []
    for q in range(n_queries):
        topic, second = rng.sample(topics, 2)
        action = rng.choice(ACTIONS)
        query = f"how do i {action} my {topic} and {second}"
        group = f"{split}-q{q}"
        words = [rng.choice(TOPICS[topic]), rng.choice(TOPICS[second]), action]
        candidates = [(_answer(rng, words, rng.randint(4, 9)), 1)]
        for _ in range(negatives):
            # a distractor shares at most one topic word with the query
            others = rng.sample([t for t in topics if t not in (topic, second)], 2)
            # ... and, like the relevant one, carries three content words
            first = (rng.choice(TOPICS[rng.choice([topic, second])]) if rng.random() < 0.5
                     else rng.choice(TOPICS[others[1]]))
            words = [first, rng.choice(TOPICS[others[0]]), rng.choice(ACTIONS)]
            candidates.append((_answer(rng, words, rng.randint(4, 9)), 0))
        rng.shuffle(candidates)
        for c, (text, label) in enumerate(candidates):
            rows.append((f"{group}-a{c}", group, query, text, label))
    return pd.DataFrame(rows, columns=["pair_id", "group_id", "left", "right", "label"])
