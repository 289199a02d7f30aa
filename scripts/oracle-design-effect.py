#!/usr/bin/env python3
"""What the block design's dependence costs against the gate's oracle.

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
  times the design effect of the pair it names);
- the drift's time structure: the lag-1 correlation of the log TTFT, in the
  order the schedule ran the requests, between neighbours on the same side
  and neighbours on different sides, by the client's clock and by the
  server's own prompt time (`server_timings.prompt_ms`, llama.cpp's). Alike
  across sides means the drift is the host's, common in time, and a smaller
  window (request k's two sides closer in time) cancels more of it.

Standard library only; approximate by design (a pass's oracle is the
dearest pair's, and only that pair's design effect is applied).
"""
import glob
import json
import math
import statistics as st
import sys

import re

# The window of a plan without one, for scripts/calibrate-gate.sh's c=1
# cell (`config::plan::default_window`).
DEFAULT_WINDOW = 1


def plan_window(q):
    try:
        m = re.search(r"^window\s*=\s*(\d+)", open(f"{q}/plan.toml").read(), re.M)
    except FileNotFoundError:
        return DEFAULT_WINDOW
    return int(m.group(1)) if m else DEFAULT_WINDOW


def metric_values(record):
    c = record["capture"]
    decode = None
    if c["e2e_ms"] > c["ttft_ms"] and c["completion_tokens"] > 1:
        decode = (c["completion_tokens"] - 1) / ((c["e2e_ms"] - c["ttft_ms"]) / 1000)
    prompt_ms = (c.get("server_timings") or {}).get("prompt_ms")
    return {"ttft_p50_ms": c["ttft_ms"], "e2e_p50_ms": c["e2e_ms"], "decode_tok_s_p50": decode,
            "server_prompt_ms": prompt_ms}


def journal(path):
    out = {}
    for line in open(path):
        r = json.loads(line)
        if r.get("outcome") == "ok":
            out[r["index"]] = metric_values(r)
    return out


def design_effect(base, cand, metric, window):
    blocks = {}
    for i in sorted(set(base) & set(cand)):
        b, c = base[i][metric], cand[i][metric]
        if b and c:
            blocks.setdefault(i // window, []).append((b, c))
    full = [v for v in blocks.values() if len(v) == window]
    if len(full) < 3:
        return None
    stat = [math.log(st.median(c for _, c in v) / st.median(b for b, _ in v)) for v in full]
    ratios = [math.log(c / b) for v in full for b, c in v]
    mid = st.median(ratios)
    robust_sd = 1.4826 * st.median(abs(x - mid) for x in ratios)
    return window * st.variance(stat) / (math.pi / 2 * robust_sd**2)


def time_structure(base, cand, window, metric):
    """Lag-1 correlation of the log metric in run order (block k: baseline
    first for even k, `interleave::pair`), each side's mean removed: between
    neighbours on the same side, and on different sides."""
    seq = []
    for k in range(max(list(base) + list(cand)) // window + 1):
        for side in ((base, cand) if k % 2 == 0 else (cand, base)):
            for i in range(k * window, (k + 1) * window):
                if i in side and side[i][metric]:
                    seq.append((id(side), math.log(side[i][metric])))
    means = {s: st.mean(v for t, v in seq if t == s) for s, _ in seq}
    seq = [(s, v - means[s]) for s, v in seq]
    var = st.pvariance([v for _, v in seq])
    pairs = list(zip(seq, seq[1:]))

    def corr(same):
        p = [(a[1], b[1]) for a, b in pairs if (a[0] == b[0]) == same]
        return sum(x * y for x, y in p) / len(p) / var if p and var > 0 else float("nan")

    return corr(True), corr(False)


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
        window = plan_window(q)
        effects = {}
        for part in gate["parts"]:
            metric = part["subject"].rsplit(".", 1)[-1]
            effects[metric] = (design_effect(base, cand, metric, window), part.get("oracle_requests_per_side"))
        named = [m for m, (_, o) in effects.items() if o == oracle]
        de = effects[named[0]][0] if named else None
        aware = used / (oracle * de) if de else None
        rows.append((used / oracle, aware))
        print(
            f"{q.rsplit('/', 1)[-1]}\t{report.get('performance_outcome')}\tused {used}\toracle {oracle}"
            f"\tratio {used / oracle:.2f}\tdesign effect ({named[0] if named else '?'}) "
            f"{de:.2f}\tagainst the design-aware oracle {aware:.2f}\tall pairs: "
            + ", ".join(f"{m} {e:.2f}" for m, (e, _) in effects.items() if e)
            + f"\twindow {window}\tlag-1 same side / across sides: TTFT "
            + "%.2f / %.2f" % time_structure(base, cand, window, "ttft_p50_ms")
            + ", server prompt_ms %.2f / %.2f" % time_structure(base, cand, window, "server_prompt_ms")
        )
    if rows:
        print(f"median ratio {st.median(r for r, _ in rows):.2f}; "
              f"against the design-aware oracle {st.median(a for _, a in rows if a):.2f}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
