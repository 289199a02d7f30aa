#!/usr/bin/env python3
"""What each way of combining request pairs would cost, on real journals.

    scripts/block-estimators.py QUALIFICATION_DIR... [--n 16,32,64] [--resamples 2000]

For each qualification run in blocks of one request (its two sides'
`*-interleaved/journal.jsonl`), the per-request log ratios candidate /
baseline of TTFT, end-to-end latency and decode speed, in request order;
for the first n pairs, the bootstrap standard error (percent) of:

- the mean (`statistics.design.block_mean = "mean"`, measured, not used),
- the 20 % trimmed mean (the gate's statistic, `"trimmed"`) and a 10 % one,
- the median.

The requests a bound needs go as the SE squared, so the ratio of two SEs,
squared, is what one estimator costs against the other on these data.
Standard library only; seeded, so a rerun prints the same.
"""

import argparse
import json
import math
import pathlib
import random
import statistics


def journal(path):
    out = {}
    for line in open(path):
        r = json.loads(line)
        out[r["index"]] = r["capture"]
    return out


def decode(c):
    span = (c["e2e_ms"] - c["ttft_ms"]) / 1000
    return (c["completion_tokens"] - 1) / span if span > 0 else None


METRICS = [
    ("ttft", lambda c: c["ttft_ms"]),
    ("e2e", lambda c: c["e2e_ms"]),
    ("decode", decode),
]


def trimmed(xs, share):
    xs = sorted(xs)
    k = int(math.floor(share * len(xs)))
    mid = xs[k : len(xs) - k]
    return sum(mid) / len(mid)


ESTIMATORS = [
    ("mean", lambda xs: sum(xs) / len(xs)),
    ("trim20", lambda xs: trimmed(xs, 0.2)),
    ("trim10", lambda xs: trimmed(xs, 0.1)),
    ("median", statistics.median),
]


def se(xs, f, resamples, rng):
    n = len(xs)
    stats = [f([xs[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples)]
    return statistics.stdev(stats) * 100


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--n", default="16,32,64")
    ap.add_argument("--resamples", type=int, default=2000)
    args = ap.parse_args()
    sizes = [int(x) for x in args.n.split(",")]
    print("| qualification | metric | n | " + " | ".join(e for e, _ in ESTIMATORS) + " |")
    print("|---|---|---|" + "---|" * len(ESTIMATORS))
    for d in args.dirs:
        d = pathlib.Path(d)
        b = journal(d / "baseline-interleaved" / "journal.jsonl")
        c = journal(d / "candidate-interleaved" / "journal.jsonl")
        keys = sorted(set(b) & set(c))
        for name, f in METRICS:
            logs = []
            for k in keys:
                x, y = f(b[k]), f(c[k])
                if x and y and x > 0 and y > 0:
                    logs.append(math.log(y / x))
            for n in sizes:
                if n > len(logs):
                    continue
                rng = random.Random(31)
                cells = [f"{se(logs[:n], e, args.resamples, rng):.2f} %" for _, e in ESTIMATORS]
                print(f"| {d.name} | {name} | {n} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
