"""Generated general text: topic documents with Zipf word choice (public, no PII)."""

from __future__ import annotations

import random

from dfsu.lexicon import FUNCTION, TOPICS


class _Zipf:
    """Draw list items with weight 1/rank (rank fixed by a seeded shuffle of the list)."""

    def __init__(self, items: list[str], rng: random.Random, exponent: float = 1.1):
        self.items = list(items)
        rng.shuffle(self.items)
        self.weights = [1.0 / (rank + 1) ** exponent for rank in range(len(self.items))]

    def __call__(self, rng: random.Random) -> str:
        return rng.choices(self.items, weights=self.weights)[0]


class Topic:
    """A topic's Zipf samplers and its fixed pairings (noun -> adjective, verb -> object)."""

    def __init__(self, words: dict[str, list[str]], rng: random.Random):
        self.noun = _Zipf(words["nouns"], rng)
        self.verb = _Zipf(words["verbs"], rng)
        self.adj = _Zipf(words["adjectives"], rng)
        self.role = _Zipf(words["roles"], rng)
        self.place = _Zipf(words["places"], rng)
        self.noun_adj = {n: rng.choice(words["adjectives"]) for n in words["nouns"]}
        self.verb_obj = {v: rng.choice(words["nouns"]) for v in words["verbs"]}

    def adj_for(self, noun: str, rng: random.Random) -> str:
        # Collocation: a noun keeps its own adjective most of the time.
        return self.noun_adj[noun] if rng.random() < 0.7 else self.adj(rng)

    def obj_for(self, verb: str, rng: random.Random) -> str:
        return self.verb_obj[verb] if rng.random() < 0.6 else self.noun(rng)


_PREPS = _Zipf(FUNCTION["preps"], random.Random(1))
_TIMES = _Zipf(FUNCTION["times"], random.Random(2))
_ADVERBS = _Zipf(FUNCTION["adverbs"], random.Random(3))


def _sentence(t: Topic, rng: random.Random) -> str:
    n1, n2 = t.noun(rng), t.noun(rng)
    v = t.verb(rng)
    obj = t.obj_for(v, rng)
    shapes = [
        lambda: f"The {t.adj_for(n1, rng)} {n1} {v} the {obj}.",
        lambda: (
            f"The {t.role(rng)} in {t.place(rng)} {v} the {t.adj_for(obj, rng)} {obj} "
            f"{_PREPS(rng)} the {n2}."
        ),
        lambda: f"According to the {t.role(rng)}, the {n1} was {t.adj_for(n1, rng)}.",
        lambda: f"Every {_TIMES(rng)}, the {t.role(rng)} {v} the {obj} {_ADVERBS(rng)}.",
        lambda: f"The {n1} of {t.place(rng)} {v} the {obj} {_PREPS(rng)} the {n2}.",
        lambda: f"{t.place(rng)} is known for its {t.adj_for(n1, rng)} {n1}.",
        lambda: f"When the {t.role(rng)} {v} the {obj}, the {n2} became {t.adj_for(n2, rng)}.",
        lambda: (
            f"In {rng.randint(1850, 2020)}, a {t.role(rng)} named "
            f"{rng.choice(FUNCTION['names'])} {v} the {obj}."
        ),
        lambda: (
            f"{rng.choice(FUNCTION['connectors'])}, the {t.adj_for(n1, rng)} {n1} and the "
            f"{n2} were {_ADVERBS(rng)} {v}."
        ),
        lambda: f"Most {t.role(rng)}s agree that the {n1} is {t.adj_for(n1, rng)}.",
    ]
    return rng.choice(shapes)()


def generate_documents(n: int, seed: int) -> list[str]:
    """n documents, each mostly on one topic (a title line, then 4-10 sentences)."""
    rng = random.Random(f"corpus-{seed}")
    topics = {name: Topic(words, rng) for name, words in TOPICS.items()}
    names = list(topics)
    docs = []
    for _ in range(n):
        main = topics[rng.choice(names)]
        title = f"{main.place(rng)} and the {main.noun(rng)}"
        sentences = []
        for _ in range(rng.randint(4, 10)):
            topic = main if rng.random() < 0.92 else topics[rng.choice(names)]
            sentences.append(_sentence(topic, rng))
        docs.append(f"{title}\n{' '.join(sentences)}")
    return docs
