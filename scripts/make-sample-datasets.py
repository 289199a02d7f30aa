#!/usr/bin/env python3
"""Write the small sample datasets under suites/data/ (no hub downloads).

- sharegpt-sample.json: ShareGPT-format conversations (1-4 turns), the
  format of a team's exported chat logs or the public ShareGPT dumps.
- openai-sample.jsonl: OpenAI chat request lines (`messages`, `max_tokens`),
  as a gateway would log a team's own traffic; half share a system prompt.
- mooncake-sample.jsonl: a Mooncake-style trace (`timestamp` ms,
  `input_length`, `output_length`, `hash_ids` of 512-token prefix blocks):
  a few long shared documents, each read by several requests, over ~48 s.

Deterministic (seeded); run again to regenerate identical files:
    python3 scripts/make-sample-datasets.py [OUT_DIR]
"""

import json
import random
import sys
from pathlib import Path

TOPICS = [
    "rivers", "bridges", "lanterns", "gardens", "harbors", "winter", "markets",
    "forests", "islands", "copper", "falcons", "orchards", "canyons", "letters",
]
ADJ = ["quiet", "bright", "old", "small", "busy", "cold", "green", "tall"]


def sentence(rng, n_words):
    words = [rng.choice(ADJ + TOPICS + ["the", "a", "and", "of", "in"]) for _ in range(n_words)]
    return " ".join(words).capitalize() + "."


def sharegpt(rng, n=40):
    out = []
    for i in range(n):
        turns = rng.randint(1, 4)
        conv = []
        if i % 5 == 0:
            conv.append({"from": "system", "value": "You are a concise assistant."})
        for t in range(turns):
            topic = rng.choice(TOPICS)
            ask = f"Tell me something about {topic}. " + " ".join(
                sentence(rng, rng.randint(6, 14)) for _ in range(rng.randint(1, 6))
            )
            conv.append({"from": "human", "value": ask})
            conv.append({"from": "gpt", "value": " ".join(
                sentence(rng, rng.randint(6, 14)) for _ in range(rng.randint(1, 4))
            )})
        out.append({"id": f"sample-{i}", "conversations": conv})
    return out


def openai(rng, n=40):
    system = "You are a support assistant for a hardware store. " + " ".join(
        sentence(rng, 12) for _ in range(20)
    )
    lines = []
    for i in range(n):
        msgs = []
        if i % 2 == 0:
            msgs.append({"role": "system", "content": system})
        msgs.append({"role": "user", "content": f"Question {i}: " + " ".join(
            sentence(rng, rng.randint(5, 15)) for _ in range(rng.randint(1, 12))
        )})
        lines.append({"model": "any", "messages": msgs,
                      "max_tokens": rng.choice([16, 24, 32, 48]), "temperature": 0.7})
    return lines


def mooncake(rng, n=48, block=512):
    docs = [[d * 100 + k for k in range(rng.randint(1, 2))] for d in range(4)]
    t = 0
    lines = []
    next_unique = 10_000
    for _ in range(n):
        t += int(rng.expovariate(1.0) * 1000)  # ~1 request per second
        doc = rng.choice(docs)
        extra = rng.randint(16, 300)
        input_length = len(doc) * block + extra
        # Blocks past the shared document are this request's own.
        ids = doc + [next_unique]
        next_unique += 1
        lines.append({"timestamp": t, "input_length": input_length,
                      "output_length": rng.randint(8, 48), "hash_ids": ids})
    return lines


# Checkable questions with exact answers for `prompt = "task"` (suites/quality.toml):
# three kinds the reference model answers about two thirds of the time, so a
# runtime that loses answers shows it. 40 of each, interleaved.
CAPITALS = [("France","Paris"),("Italy","Rome"),("Japan","Tokyo"),("Spain","Madrid"),("Germany","Berlin"),("England","London"),("Russia","Moscow"),("Egypt","Cairo"),("Greece","Athens"),("China","Beijing"),("Canada","Ottawa"),("Portugal","Lisbon"),("Ireland","Dublin"),("Austria","Vienna"),("Poland","Warsaw"),("Norway","Oslo"),("Sweden","Stockholm"),("Finland","Helsinki"),("Denmark","Copenhagen"),("Hungary","Budapest"),("Belgium","Brussels"),("Netherlands","Amsterdam"),("Switzerland","Bern"),("Turkey","Ankara"),("India","New Delhi"),("Thailand","Bangkok"),("Kenya","Nairobi"),("Peru","Lima"),("Chile","Santiago"),("Argentina","Buenos Aires"),("Mexico","Mexico City"),("Cuba","Havana"),("Iran","Tehran"),("Iraq","Baghdad"),("Australia","Canberra"),("Scotland","Edinburgh"),("Wales","Cardiff"),("South Korea","Seoul"),("Vietnam","Hanoi"),("Indonesia","Jakarta")]
OPPOSITES = [("hot","cold"),("big","small"),("up","down"),("day","night"),("fast","slow"),("open",["closed","close"]),("happy","sad"),("old",["new","young"]),("light","dark"),("left","right"),("wet","dry"),("yes","no"),("tall","short"),("hard","soft"),("full","empty"),("early","late"),("rich","poor"),("strong","weak"),("high","low"),("in","out"),("win","lose"),("thick","thin"),("black","white"),("good","bad"),("push","pull"),("buy","sell"),("first","last"),("inside","outside"),("north","south"),("east","west"),("love","hate"),("clean","dirty"),("loud","quiet"),("heavy","light"),("near","far"),("start",["end","finish","stop"]),("true","false"),("alive","dead"),("above","below"),("cheap","expensive")]
UPPER_WORDS = ["apple","river","stone","green","house","cloud","music","table","light","bread","tiger","chair","water","plant","sugar","glass","horse","train","paper","money","storm","beach","night","smile","dream","heart","ocean","piano","lemon","candy","forest","garden","window","yellow","orange","silver","dragon","rabbit","rocket","winter"]


def tasks():
    out = []
    for i in range(40):
        c, a = CAPITALS[i]
        out.append({"question": f"What is the capital of {c}?", "answer": a, "kind": "capital"})
        w, a = OPPOSITES[i]
        out.append({"question": f"What is the opposite of {w}?", "answer": a, "kind": "opposite"})
        u = UPPER_WORDS[i]
        out.append({"question": f"Write the word {u} in capital letters.", "answer": u.upper(), "kind": "uppercase"})
    return out


def main():
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "suites" / "data"
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(20261202)
    (out / "sharegpt-sample.json").write_text(json.dumps(sharegpt(rng), indent=1) + "\n")
    (out / "openai-sample.jsonl").write_text("".join(json.dumps(l) + "\n" for l in openai(rng)))
    (out / "mooncake-sample.jsonl").write_text("".join(json.dumps(l) + "\n" for l in mooncake(rng)))
    (out / "tasks-basic.jsonl").write_text("".join(json.dumps(l) + "\n" for l in tasks()))
    print(f"wrote {out}/sharegpt-sample.json, openai-sample.jsonl, mooncake-sample.jsonl")


if __name__ == "__main__":
    main()
