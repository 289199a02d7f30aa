#!/usr/bin/env python3
"""A qualification's cost against the block-level known-variance oracle.

    scripts/block-oracle.py QUALIFICATION_DIR [--kind K] [--exit RC] [--seconds S]
    scripts/block-oracle.py --table RUNS.jsonl

Reads the qualification's pooled sides (baseline.json, candidate.json: each
cell's samples and the interleaved block of each), its report (verdict,
gating metrics, margins, alpha) and its ledger lines for the rounds, and
prints one JSON row. Standard library only: it shares no code with
infergate's gate, so it cross-checks the report's own oracle.

The oracle, per gating (cell, metric): each block's statistic is the log
ratio of the two sides' medians in that block (as the gate's), its spread
the blocks' sample SD taken as known, the effect the distance in log from
the blocks' mean to the margin. A one-look z test at the fixed-size level
(alpha/pairs on the fail side, alpha on the pass side) and power 0.8 needs
ceil(sd^2 (z_a + z_0.8)^2 / effect^2) blocks, at least 1. The schedule runs
blocks in rounds of two (A B B A), so the oracle's cost is in whole rounds.
The verdict's oracle: where a pair's mean lies beyond its margin, the
cheapest such pair (any pair failing fails the gate); else the dearest pair
(every pair must pass). Cost = the rounds the run spent / the oracle's.
"""
import json
import math
import statistics as st
import sys
from pathlib import Path

POWER_Z = 0.8416212335729143  # z_{0.8}
BLOCKS_PER_ROUND = 2


def z(p):
    return st.NormalDist().inv_cdf(p)


def median(v):
    return st.median(v)


def worse_log(direction, percent):
    if direction == "lower_is_better":
        return math.log1p(percent / 100)
    return -math.log1p(-percent / 100)


def worse_percent(direction, log):
    if direction == "lower_is_better":
        return math.expm1(log) * 100
    return -math.expm1(-log) * 100


def blocks(side_cell, sample):
    vals = side_cell["samples"].get(sample, [])
    ids = side_cell["sample_clusters"].get(sample, [])
    out = {}
    for v, k in zip(vals, ids):
        out.setdefault(k, []).append(v)
    return out


def pair_oracle(b_cell, c_cell, metric, alpha_pass, alpha_fail):
    b, c = blocks(b_cell, metric["sample"]), blocks(c_cell, metric["sample"])
    logs = []
    for k in sorted(set(b) & set(c)):
        mb, mc = median(b[k]), median(c[k])
        if mb > 0 and mc > 0:
            r = math.log(mc / mb)
            logs.append(r if metric["direction"] == "lower_is_better" else -r)
    if len(logs) < 2:
        return None
    mean, sd = st.fmean(logs), st.stdev(logs)
    margin = worse_log(metric["direction"], metric["threshold_percent"])
    effect = abs(mean - margin)
    fails = mean > margin
    a = alpha_fail if fails else alpha_pass
    if effect == 0:
        return None
    n = max(1, math.ceil((sd * (z(1 - a) + POWER_Z) / effect) ** 2)) if sd > 0 else 1
    return {
        "blocks": len(logs),
        "worse_percent": round(worse_percent(metric["direction"], mean), 2),
        "block_sd_log": round(sd, 4),
        "fail_side": fails,
        "oracle_blocks": n,
        "oracle_rounds": math.ceil(n / BLOCKS_PER_ROUND),
    }


def rounds_spent(qdir):
    """Adaptive rounds from the ledger's `round` lines, via infergate status."""
    import subprocess

    out = subprocess.run(
        ["target/release/infergate", "status", Path(qdir).name],
        capture_output=True,
        text=True,
    ).stdout
    return sum(1 for line in out.splitlines() if " round " in line and " ok " in line)


def row(qdir, kind, rc, seconds):
    q = Path(qdir)
    r = json.loads((q / "report.json").read_text())
    b = {x["name"]: x for x in json.loads((q / "baseline.json").read_text())["cells"]}
    c = {x["name"]: x for x in json.loads((q / "candidate.json").read_text())["cells"]}
    metrics = r["policy"]["metrics"]
    alpha = r["policy"].get("alpha", 0.05)
    pairs = len(metrics) * len(b)
    alpha_fail = alpha / pairs
    per_pair = {}
    for name in b:
        for m in metrics:
            o = pair_oracle(b[name], c[name], m, alpha, alpha_fail)
            if o:
                per_pair[f"{name}.{m['name']}"] = o
    failing = [o["oracle_rounds"] for o in per_pair.values() if o["fail_side"]]
    oracle = min(failing) if failing else max((o["oracle_rounds"] for o in per_pair.values()), default=None)
    spent = rounds_spent(q)
    g = r.get("gates", {}).get("performance_evidence", {})
    return {
        "id": q.name,
        "kind": kind,
        "exit": rc,
        "minutes": round(seconds / 60, 1),
        "performance": g.get("outcome"),
        "qualification": r.get("qualification"),
        "rounds": spent,
        "requests_per_side": {n: b[n]["requests"] for n in b},
        "oracle_rounds": oracle,
        "cost_over_oracle": round(spent / oracle, 2) if oracle and spent else None,
        "pairs": per_pair,
    }


def table(path):
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    print("| run | verdict (performance) | rounds | requests per side | minutes | oracle rounds | cost / oracle |")
    print("|---|---|---|---|---|---|---|")
    for x in rows:
        req = ", ".join(f"{k} {v}" for k, v in x["requests_per_side"].items())
        print(
            f"| {x['kind']} {x['id']} | {x['qualification']} ({x['performance']}) | {x['rounds']} | {req} "
            f"| {x['minutes']} | {x['oracle_rounds']} | {x['cost_over_oracle']} |"
        )
    ratios = sorted(x["cost_over_oracle"] for x in rows if x["cost_over_oracle"] is not None)
    if ratios:
        print(f"\nmedian cost / oracle over {len(ratios)} runs: {st.median(ratios)}")


def main(argv):
    if argv[:1] == ["--table"]:
        return table(argv[1])
    qdir, kind, rc, seconds = argv[0], "run", None, 0.0
    it = iter(argv[1:])
    for a in it:
        if a == "--kind":
            kind = next(it)
        elif a == "--exit":
            rc = int(next(it))
        elif a == "--seconds":
            seconds = float(next(it))
    print(json.dumps(row(qdir, kind, rc, seconds)))


if __name__ == "__main__":
    main(sys.argv[1:])
