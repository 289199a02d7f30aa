#!/usr/bin/env python3
"""What the block design's dependence costs against the gate's oracle (#31).

    scripts/oracle-design-effect.py QUALIFICATIONS_DIR

For every adaptive qualification under QUALIFICATIONS_DIR (the `q`
directory `scripts/calibrate-gate.sh` leaves in its work directory), from
the two sides' journals and the report:

- the report's cost: `requests_per_side` against `oracle_requests_per_side`
  (the known-variance oracle, which reads the per-request log ratios as
  independent: robust SD, pi/2 for a median);
- per gating pair, the design effect: the variance of the gate's own block
  statistic (each block's log ratio of the two sides' medians, `window`
  requests per side) over what the oracle assumes for `window` requests,
  `window * Var(block statistic) / (pi/2 * robust SD^2)`. Requests of a
  block run back to back on one runtime, so their ratios share the drift
  between the block and its pair and are correlated: the oracle's
  independence overstates what each request carries;
- the cost against an oracle that knows that variance (the report's oracle
  times the design effect of the pair it names).

Standard library only; approximate by design (a pass's oracle is the
dearest pair's, and only that pair's design effect is applied).
"""
import glob
import json
import math
import statistics as st
import sys

WINDOW = 4  # scripts/calibrate-gate.sh's plan: window = 4


def metric_values(record):
    c = record["capture"]
    decode = None
    if c["e2e_ms"] > c["ttft_ms"] and c["completion_tokens"] > 1:
        decode = (c["completion_tokens"] - 1) / ((c["e2e_ms"] - c["ttft_ms"]) / 1000)
    return {"ttft_p50_ms": c["ttft_ms"], "e2e_p50_ms": c["e2e_ms"], "decode_tok_s_p50": decode}


def journal(path):
    out = {}
    for line in open(path):
        r = json.loads(line)
        if r.get("outcome") == "ok":
            out[r["index"]] = metric_values(r)
    return out


def design_effect(base, cand, metric):
    blocks = {}
    for i in sorted(set(base) & set(cand)):
        b, c = base[i][metric], cand[i][metric]
        if b and c:
            blocks.setdefault(i // WINDOW, []).append((b, c))
    full = [v for v in blocks.values() if len(v) == WINDOW]
    if len(full) < 3:
        return None
    stat = [math.log(st.median(c for _, c in v) / st.median(b for b, _ in v)) for v in full]
    ratios = [math.log(c / b) for v in full for b, c in v]
    mid = st.median(ratios)
    robust_sd = 1.4826 * st.median(abs(x - mid) for x in ratios)
    return WINDOW * st.variance(stat) / (math.pi / 2 * robust_sd**2)


def main(root):
    rows = []
    for q in sorted(glob.glob(f"{root}/gate-*adaptive*")):
        try:
            report = json.load(open(f"{q}/report.json"))
        except FileNotFoundError:  # a trial stopped before its report
            continue
        gate = (report.get("gates") or {}).get("performance_evidence") or {}
        used, oracle = gate.get("requests_per_side"), gate.get("oracle_requests_per_side")
        if not (used and oracle):
            continue
        base = journal(f"{q}/baseline-interleaved/journal.jsonl")
        cand = journal(f"{q}/candidate-interleaved/journal.jsonl")
        effects = {}
        for part in gate["parts"]:
            metric = part["subject"].rsplit(".", 1)[-1]
            effects[metric] = (design_effect(base, cand, metric), part.get("oracle_requests_per_side"))
        named = [m for m, (_, o) in effects.items() if o == oracle]
        de = effects[named[0]][0] if named else None
        aware = used / (oracle * de) if de else None
        rows.append((used / oracle, aware))
        print(
            f"{q.rsplit('/', 1)[-1]}\t{report.get('performance_outcome')}\tused {used}\toracle {oracle}"
            f"\tratio {used / oracle:.2f}\tdesign effect ({named[0] if named else '?'}) "
            f"{de:.2f}\tagainst the design-aware oracle {aware:.2f}\tall pairs: "
            + ", ".join(f"{m} {e:.2f}" for m, (e, _) in effects.items() if e)
        )
    if rows:
        print(f"median ratio {st.median(r for r, _ in rows):.2f}; "
              f"against the design-aware oracle {st.median(a for _, a in rows if a):.2f}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
