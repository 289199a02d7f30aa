#!/usr/bin/env bash
# infergate's latency numbers beside vLLM's own benchmark client (`vllm bench
# serve`), on one vLLM server and the same cells, written side by side:
#
#   scripts/bench-vllm.sh [OUT.md]        (default docs/vllm-agreement.md)
#
# Environment (defaults in brackets):
#   PORT [18410]       loopback port the vLLM server started here listens on
#   REQUESTS [20]      measured requests per cell, for each tool
#   CELLS ["1 4"]      the concurrency levels, one cell each
#   PROMPT [256]       prompt tokens per request, chat template included
#   OUTPUT [32]        output tokens per request (ignore_eos: every answer runs to it)
#   SEED [1]           seed of both tools' prompts and of the bootstrap
#   BOOT [2000]        bootstrap resamples for the 95 % intervals of the p50s
#   SERVE_FLAGS ["--no-enable-prefix-caching"]  extra `vllm serve` flags: vLLM's
#                      client sends its first prompt again as its test request and
#                      warmups, so with prefix caching on its first measured request
#                      hits the cache (TTFT several times lower)
#   VLLM_INPUT_LEN     vLLM's --random-input-len [PROMPT minus the chat template's
#                      tokens, as infergate measures them: vLLM's prompt is the user
#                      message, the server adds the template]
#   INFERGATE [target/debug/infergate]  the binary measured (not built here)
#   KEEP [0]           1: keep the work directory (run.json, journals, vLLM's json)
#   REPORT_ONLY        a kept work directory: write OUT again from it, measuring nothing
#
# One vLLM server (engine/vllm-serve.sh, via scripts/setup-vllm.sh) serves both
# tools. First a warmup (2 infergate requests, which also measure the chat
# template's tokens); then for each concurrency C: `infergate run` (C warmup
# requests, then REQUESTS at C in flight, closed loop, unique prompts,
# ignore_eos) and `vllm bench serve` (random dataset, same token counts, C
# REQUESTS at --max-concurrency C, --request-rate inf, ignore_eos, no warmups
# of its own beyond its test request, so the server's window holds its requests),
# the order alternating cell by cell. OUT gets one table per cell: TTFT, TPOT,
# ITL, E2E p50/p90/p99 of each tool, their ratio, bootstrap intervals of both
# p50s, and whether they agree within noise; plus the prompt tokens each tool
# sent, the vLLM version and the command that regenerates it. A third source
# arbitrates: vLLM's own timer histograms (/metrics, read before and after each
# tool's run) beside each client's means, and the CPU each client used.
# Traffic to 127.0.0.1 only. About 2 min of start-up, then ~1 min per cell at
# the defaults on 2 cores. The script stops only the server it started.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

say() { printf 'bench-vllm: %s\n' "$*" >&2; }
die() {
    printf 'bench-vllm: error: %s\n' "$*" >&2
    exit 1
}

case "${1:-}" in
-h | --help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
    ;;
-*) die "unknown option $1 (usage: scripts/bench-vllm.sh [OUT.md])" ;;
esac
(($# <= 1)) || die "usage: scripts/bench-vllm.sh [OUT.md]"
out=${1:-docs/vllm-agreement.md}
PORT=${PORT:-18410}
REQUESTS=${REQUESTS:-20}
CELLS=${CELLS:-"1 4"}
PROMPT=${PROMPT:-256}
OUTPUT=${OUTPUT:-32}
SEED=${SEED:-1}
BOOT=${BOOT:-2000}
SERVE_FLAGS=${SERVE_FLAGS---no-enable-prefix-caching}
KEEP=${KEEP:-0}
bin=${INFERGATE:-$root/target/debug/infergate}
for v in PORT REQUESTS PROMPT OUTPUT SEED BOOT; do
    [[ "${!v}" =~ ^[0-9]+$ ]] || die "$v must be a whole number, not '${!v}'"
done
read -r -a cells <<<"$CELLS"
((${#cells[@]})) || die "CELLS is empty"
for c in "${cells[@]}"; do
    [[ "$c" =~ ^[1-9][0-9]*$ ]] || die "CELLS holds concurrency levels (e.g. \"1 4\"), not '$c'"
done
[[ -x "$bin" ]] || die "no infergate binary at $bin (build it first, or set INFERGATE)"
mkdir -p "$(dirname "$out")"

# The Markdown from a work directory's results: render MANIFEST OUT META...
render() {
    python3 - "$@" <<'PY'
import datetime, json, math, os, random, sys

manifest, out = sys.argv[1], sys.argv[2]
meta = dict(a.split("=", 1) for a in sys.argv[3:])
B = int(meta["boot"])
rng = random.Random(int(meta["seed"]))
METRICS = [("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2e", "E2E")]
VKEY = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e": "e2el"}


def pct(xs, p):
    """Linear interpolation between closest ranks: numpy's default, and infergate's."""
    s = sorted(xs)
    if not s:
        return None
    k = (len(s) - 1) * p / 100.0
    lo = math.floor(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def boot_p50(per_request):
    """95 % percentile-bootstrap interval of the p50: requests resampled with
    replacement, each request's values (one, or its ITL gaps) pooled."""
    if len(per_request) < 2:
        return None
    n = len(per_request)
    stats = []
    for _ in range(B):
        pooled = [v for i in range(n) for v in per_request[rng.randrange(n)]]
        stats.append(pct(pooled, 50))
    return pct(stats, 2.5), pct(stats, 97.5)


def tail(path, n=4):
    try:
        return " / ".join(l.strip() for l in open(path, errors="replace").read().splitlines()[-n:])
    except OSError:
        return "(no log)"


def load_ig(d):
    try:
        rj = json.load(open(os.path.join(d, "run.json")))
    except (OSError, ValueError):
        return None
    c = rj["cells"][0]
    m = c["metrics"]
    rows = [r for r in c.get("request_rows", []) if r.get("ok")]
    per = {k: [[r[k + "_ms"]] for r in rows if r.get(k + "_ms") is not None] for k in ("ttft", "tpot", "e2e")}
    per["itl"] = []
    try:
        for line in open(os.path.join(d, "journal.jsonl")):
            rec = json.loads(line)
            if rec.get("cell") == c["name"] and rec.get("outcome") == "ok":
                ch = rec["capture"].get("chunk_ms") or []
                per["itl"].append([b - a for a, b in zip(ch, ch[1:])])
    except (OSError, ValueError):
        pass
    summ = {k: m.get(k + "_ms") for k, _ in METRICS}
    # The journal and request_rows should give back run.json's own p50s.
    mismatch = [k for k, _ in METRICS if summ[k] and per[k]
                and abs(pct([v for r in per[k] for v in r], 50) - summ[k]["p50"]) > 1e-6 * max(1.0, summ[k]["p50"])]
    pt = m.get("prompt_tokens") or {}
    return dict(
        summ=summ, per=per, ok=c["succeeded"], failed=c["failed"], mismatch=mismatch,
        prompt=(pt.get("p50"), pt.get("min"), pt.get("max")),
        completion=(m.get("completion_tokens") or {}).get("p50"),
        estimated=c.get("tokens_estimated"), eligible=c.get("performance_eligible"),
        server_build=rj["provenance"].get("server_build"), tool=rj["provenance"].get("tool_version"),
    )


def load_vllm(path):
    try:
        v = json.load(open(path))
    except (OSError, ValueError):
        return None
    okd = [i for i, e in enumerate(v.get("errors", [])) if not e]
    ttft = [v["ttfts"][i] * 1000 for i in okd]
    lat = [v["latencies"][i] * 1000 for i in okd]
    olen = [v["output_lens"][i] for i in okd]
    per = {
        "ttft": [[x] for x in ttft],
        "e2e": [[x] for x in lat],
        "tpot": [[(l - t) / (o - 1)] for t, l, o in zip(ttft, lat, olen) if o > 1],
        "itl": [[g * 1000 for g in v["itls"][i]] for i in okd],
    }
    summ = {}
    for k, _ in METRICS:
        vk = VKEY[k]
        n = sum(len(r) for r in per[k])
        summ[k] = {"p50": v.get(f"p50_{vk}_ms"), "p90": v.get(f"p90_{vk}_ms"), "p99": v.get(f"p99_{vk}_ms"), "n": n}
    inl = [v["input_lens"][i] for i in okd]
    first_gaps = [v["itls"][i][0] * 1000 for i in okd if v["itls"][i]]
    return dict(
        summ=summ, per=per, ok=v.get("completed"), failed=v.get("failed"),
        prompt=(pct(inl, 50), min(inl, default=None), max(inl, default=None)),
        total_input=v.get("total_input_tokens"), total_output=v.get("total_output_tokens"),
        gaps_per_request=pct([len(v["itls"][i]) for i in okd], 50), first_gap=pct(first_gaps, 50),
    )


# The server's own histograms (vLLM's timers, read with a line split): their
# (sum, count) increase over one tool's run. The window holds that tool's
# warmups and test request too; its count says how many requests it saw.
SERVER = {"ttft": "vllm:time_to_first_token_seconds", "itl": "vllm:inter_token_latency_seconds",
          "tpot": "vllm:request_time_per_output_token_seconds", "e2e": "vllm:e2e_request_latency_seconds"}


def hist_totals(path):
    tot = {}
    try:
        lines = open(path).read().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("#") or " " not in line:
            continue
        name, value = line.split("{", 1)[0].split(" ", 1)[0], line.rsplit(" ", 1)[1]
        for k, base in SERVER.items():
            for part in ("sum", "count"):
                if name == f"{base}_{part}":
                    tot[(k, part)] = tot.get((k, part), 0.0) + float(value)
    return tot


def server_window(work, tool, c):
    if tool == "infergate":
        # infergate's own window: read after its warmup and after its last
        # request, so its prompt-sizing probes and warmups are outside it.
        try:
            sm = json.load(open(os.path.join(work, f"ig-c{c}", "run.json")))["cells"][0]["server_metrics"][0]
        except (OSError, ValueError, KeyError, IndexError):
            return None
        out = {}
        for k, base in SERVER.items():
            h = [v for n, v in sm.get("histograms", {}).items() if n.split("{")[0] == base]
            dn, ds = sum(x["count"] for x in h), sum(x["sum"] for x in h)
            out[k] = (ds / dn * 1000 if dn > 0 else None, dn)
        return out
    a = hist_totals(os.path.join(work, f"metrics-{tool}-c{c}-before.txt"))
    b = hist_totals(os.path.join(work, f"metrics-{tool}-c{c}-after.txt"))
    if not a or not b:
        return None
    out = {}
    for k in SERVER:
        dn = b.get((k, "count"), 0) - a.get((k, "count"), 0)
        ds = b.get((k, "sum"), 0) - a.get((k, "sum"), 0)
        out[k] = (ds / dn * 1000 if dn > 0 else None, dn)
    return out


def cpu_s(work, tool, c):
    try:
        u, sy = open(os.path.join(work, f"cpu-{tool}-c{c}.txt")).read().split()[-2:]
        return float(u) + float(sy)
    except (OSError, ValueError):
        return None


def vllm_means(path):
    try:
        v = json.load(open(path))
    except (OSError, ValueError):
        return {}
    return {k: v.get(f"mean_{VKEY[k]}_ms") for k, _ in METRICS}


def f(x, d=1):
    return "—" if x is None else f"{x:.{d}f}"


def tok(p):
    if p[0] is None:
        return "—"
    return f"{p[0]:.0f}" + ("" if p[1] == p[2] else f" ({p[1]:.0f}–{p[2]:.0f})")


cells = []
for line in open(manifest):
    c, order, ig_rc, ig_s, v_rc, v_s, work = line.rstrip("\n").split("\t")
    cells.append(dict(c=int(c), order=order, ig_rc=int(ig_rc), ig_s=ig_s, v_rc=int(v_rc), v_s=v_s,
                      ig=load_ig(os.path.join(work, f"ig-c{c}")) if int(ig_rc) == 0 else None,
                      v=load_vllm(os.path.join(work, f"vllm-c{c}.json")) if int(v_rc) == 0 else None,
                      ig_log=os.path.join(work, f"ig-c{c}.log"), v_log=os.path.join(work, f"vllm-c{c}.log"),
                      work=work, v_means=vllm_means(os.path.join(work, f"vllm-c{c}.json"))))

server_build = next((x["ig"]["server_build"] for x in cells if x["ig"]), None)
tool = next((x["ig"]["tool"] for x in cells if x["ig"]), None)
first_gap = next((x["v"]["first_gap"] for x in cells if x["v"] and x["v"]["first_gap"] is not None), None)
gaps = next((x["v"]["gaps_per_request"] for x in cells if x["v"]), None)
R, P, O, T = int(meta["requests"]), int(meta["prompt"]), int(meta["output"]), int(meta["template"])
L = [
    "# infergate beside `vllm bench serve`: latency agreement on one vLLM server",
    "",
    f"Generated by `scripts/bench-vllm.sh` on {meta['started']} (infergate {meta['rev']}, "
    f"tool_version {tool or '?'}, binary `{os.path.relpath(meta['bin'])}`), in {meta['elapsed']} s. Regenerate with:",
    "",
    "```sh",
    meta["cmd"],
    "```",
    "",
    "## Setup",
    "",
    f"- {meta['nproc']} CPUs; load average at start {meta['load_start']}, at end {meta['load_end']}. "
    "Both clients and the server share these cores.",
    f"- vLLM {meta['vllm_version']} (server reports build {server_build or '?'}), CPU build, "
    f"`engine/vllm-serve.sh --port PORT {meta['serve_flags']}`, model SmolLM2-135M-Instruct "
    "(served as SmolLM2-135M-Instruct-Q4_1), on 127.0.0.1. vLLM's client is that venv's "
    "`vllm bench serve`, same version.",
    "- Prefix caching is off on the server because `vllm bench serve` sends its first prompt again as its "
    "test request and as its warmups: with caching on, its first measured request is a cache hit."
    if "--no-enable-prefix-caching" in meta["serve_flags"].split() else
    "- Prefix caching is on: `vllm bench serve` sends its first prompt as its test request and warmups, "
    "so its first measured request may be a cache hit (lower TTFT).",
    f"- Each cell, per tool: {R} measured requests, closed loop at the cell's concurrency (vLLM: "
    "`--max-concurrency C --request-rate inf`); infergate first sends as many warmup requests as the "
    "concurrency, vLLM's client only its one test request (`--num-warmups 0`), "
    f"{O} output tokens forced (`ignore_eos`; infergate `--output fixed`), temperature 0, streaming chat completions "
    "with usage. The tool that goes first alternates cell by cell; a 2-request infergate warmup precedes all.",
    f"- Prompts: infergate sizes each unique prompt (`--cache unique`) so the server counts {P} tokens, "
    f"chat template included (±5 %); vLLM's random dataset sends a user message of `--random-input-len "
    f"{meta['vllm_input']}` tokens and the server adds the template ({T} tokens, measured by infergate's warmup). "
    "The token counts below are the server's `usage.prompt_tokens` as each tool recorded them.",
    "",
    "## How to read the tables",
    "",
    "- p50/p90/p99: each tool's own numbers (both interpolate linearly between closest ranks). "
    "TTFT, TPOT, E2E are per request; ITL is pooled over every gap of the cell.",
    f"- The brackets are 95 % bootstrap intervals of each p50, computed here from the tools' per-request "
    f"data ({B} resamples of the requests with replacement; ITL pools the resampled requests' gaps). "
    "run.json has no interval of its own.",
    "- **within noise** = vLLM's p50 lies inside infergate's interval; *no, intervals overlap* = it does not, "
    "but the two intervals overlap; *no* = they are disjoint. With few requests the intervals are wide, "
    "so *within noise* is weak evidence of agreement.",
    "- ratio = vLLM p50 / infergate p50 (in brackets, the relative difference).",
    "",
    "Definitions that differ (read from each tool's code and data, not assumed):",
    "",
    "- TTFT: infergate stops at the first non-empty content delta; `vllm bench serve` at the first SSE chunk "
    "with `choices`, which on vLLM is the role-only chunk sent just before the first token"
    + (f" (measured gap to the first content chunk: median {first_gap:.2f} ms)." if first_gap is not None else "."),
    "- ITL: vLLM's client counts that role→content gap as an inter-token gap"
    + (f" ({gaps:.0f} gaps per {O}-token answer, infergate {O - 1})" if gaps is not None else "")
    + ", so its ITL pool holds one near-zero gap per request (p50 barely moves; mean and low percentiles do).",
    "- E2E: infergate ends at the end of the stream (`[DONE]`); vLLM at the last chunk carrying a token. "
    "TPOT is (E2E − TTFT) / (output tokens − 1) in both, each with its own E2E and TTFT "
    "(infergate: from the first output-bearing delta).",
    "",
]
verdicts = []
arb = []
for x in cells:
    c, ig, v = x["c"], x["ig"], x["v"]
    L += [f"## Concurrency {c}", ""]
    L.append(f"- order: {x['order']}; wall time infergate {x['ig_s'] or '—'} s, vLLM {x['v_s'] or '—'} s "
             "(vLLM's includes its ~20 s start-up, its test request and warmups)")
    if ig is None:
        L.append(f"- **infergate failed** (exit {x['ig_rc']}): {tail(x['ig_log'])}")
    if v is None:
        L.append(f"- **vllm bench serve failed** (exit {x['v_rc']}): {tail(x['v_log'])}")
    if ig:
        L.append(f"- infergate: {ig['ok']}/{ig['ok'] + ig['failed']} ok; prompt tokens p50 {tok(ig['prompt'])}; "
                 f"output tokens p50 {f(ig['completion'], 0)}" + ("; token counts estimated client-side" if ig["estimated"] else "")
                 + ("" if ig["eligible"] in (None, True) else "; cell not performance-eligible"))
        if ig["mismatch"]:
            L.append(f"- note: p50 recomputed from infergate's journal differs from run.json for {', '.join(ig['mismatch'])}")
    if v:
        L.append(f"- vLLM: {v['ok']}/{(v['ok'] or 0) + (v['failed'] or 0)} ok; prompt tokens p50 {tok(v['prompt'])} "
                 f"(total_input_tokens {v['total_input']}); output tokens {v['total_output']} in all")
    L.append("")
    if not (ig and v):
        continue
    L += ["| metric | infergate p50 [95 % CI] | vLLM p50 [95 % CI] | ratio vLLM/infergate | within noise | infergate p90 / p99 | vLLM p90 / p99 | n infergate / vLLM |",
          "|---|---|---|---|---|---|---|---|"]
    for k, name in METRICS:
        a, b = ig["summ"].get(k), v["summ"].get(k)
        if not a or b.get("p50") is None:
            L.append(f"| {name} (ms) | — | — | — | — | — | — | — |")
            continue
        ca, cb = boot_p50(ig["per"][k]), boot_p50(v["per"][k])
        ratio = b["p50"] / a["p50"] if a["p50"] else None
        if ca is None:
            verdict = "—"
        elif ca[0] <= b["p50"] <= ca[1]:
            verdict = "yes"
        elif cb is not None and cb[0] <= ca[1] and ca[0] <= cb[1]:
            verdict = "no, intervals overlap"
        else:
            verdict = "no"
        verdicts.append((c, name, verdict))
        ci = lambda p: "" if p is None else f" [{p[0]:.1f}, {p[1]:.1f}]"
        rel = "" if ratio is None else f"{ratio:.3f} ({(ratio - 1) * 100:+.1f} %)"
        L.append(f"| {name} (ms) | {f(a['p50'])}{ci(ca)} | {f(b['p50'])}{ci(cb)} | {rel} | {verdict} | "
                 f"{f(a['p90'])} / {f(a['p99'])} | {f(b['p90'])} / {f(b['p99'])} | {a['n']} / {b['n']} |")
    L.append("")
    # The third source: what vLLM's own timers saw while each tool ran.
    sw = {t: server_window(x["work"], t, c) for t in ("infergate", "vllm")}
    if sw["infergate"] and sw["vllm"]:
        means = {"infergate": {k: (ig["summ"].get(k) or {}).get("mean") for k, _ in METRICS},
                 "vllm": {k: x["v_means"].get(k) for k, _ in METRICS}}
        L += ["The server's own timers (vLLM's histograms, Δsum/Δcount) beside each client's mean, and the CPU "
              "each client used. infergate's window is its own scrape, after its warmup and after its last "
              "request; `vllm bench serve`'s is read by this script around the tool, so it also holds the tool's "
              "one test request (the first prompt, sent alone before the benchmark):", "",
              "| while | client CPU (s) | requests the server saw | " + " | ".join(f"{n} server / client mean (ms)" for _, n in METRICS) + " |",
              "|---|---|---|" + "---|" * len(METRICS)]
        for t, label in (("infergate", "infergate ran"), ("vllm", "vllm bench serve ran")):
            cells_ = " | ".join(f"{f(sw[t][k][0])} / {f(means[t][k])}" for k, _ in METRICS)
            L.append(f"| {label} | {f(cpu_s(x['work'], t, c), 2)} | {sw[t]['ttft'][1]:.0f} | {cells_} |")
        arb.append((c, sw, means))
        si, sv = sw["infergate"]["itl"][0], sw["vllm"]["itl"][0]
        if si and sv:
            L += ["", f"The server's own ITL mean was {si:.1f} ms while infergate ran and {sv:.1f} ms while "
                  f"`vllm bench serve` ran ({(sv / si - 1) * 100:+.1f} %): a difference between the tools that the "
                  "server's timers show too is the server's speed changing (load, drift), not a measuring error."]
        L.append("")
if verdicts:
    yes = sum(1 for *_, w in verdicts if w == "yes")
    L += ["## Summary", "",
          f"{yes} of {len(verdicts)} p50s agree within noise (vLLM's p50 inside infergate's 95 % interval)"
          + ("." if yes == len(verdicts) else "; not within noise: "
             + ", ".join(f"{n} at c={c} ({w})" for c, n, w in verdicts if w != "yes") + "."),
          ""]
if arb:
    # The check that decides: each client against the server's timers over
    # its own window, and the tools' difference against the server's own.
    def gap(t, k):
        out = []
        for c, sw, means in arb:
            srv, cli = sw[t][k][0], means[t][k]
            if srv and cli:
                out.append((cli - srv, (cli / srv - 1) * 100, c))
        return out
    L += ["Against the server's own timers (the means of each window):", ""]
    for t, label in (("infergate", "infergate"), ("vllm", "`vllm bench serve`")):
        parts = []
        for k, name in METRICS:
            g = gap(t, k)
            if g:
                worst = max(g, key=lambda z: abs(z[1]))
                parts.append(f"{name} {worst[0]:+.1f} ms ({worst[1]:+.1f} %, c={worst[2]})")
        L.append(f"- {label} − server, largest gap per metric: " + "; ".join(parts) + ".")
    rows = []
    for c, sw, means in arb:
        for k, name in METRICS:
            ci, cv = means["infergate"][k], means["vllm"][k]
            si, sv = sw["infergate"][k][0], sw["vllm"][k][0]
            if ci and cv and si and sv:
                rows.append(f"{name} c={c}: clients {(cv / ci - 1) * 100:+.1f} %, server {(sv / si - 1) * 100:+.1f} %")
    L += [f"- vLLM's client against infergate (means), beside the server's own change between the two windows: "
          + "; ".join(rows) + ".",
          "- Read: where the tools differ by as much as the server's own timers do between their windows, the "
          "difference is the server's speed (the runs are minutes apart on a shared 2-core machine), not either "
          "tool's measuring. vLLM's ITL mean sits about 1/32 below the server's: its extra role→content gap.",
          ""]
open(out, "w").write("\n".join(L))
print("\n".join(L))
PY
}

# REPORT_ONLY=DIR: write OUT again from a work directory kept with KEEP=1.
if [[ -n "${REPORT_ONLY:-}" ]]; then
    [[ -f "$REPORT_ONLY/meta.args" ]] || die "$REPORT_ONLY has no meta.args (keep one with KEEP=1)"
    mapfile -t meta_args <"$REPORT_ONLY/meta.args"
    sed "s|\t[^\t]*$|\t$REPORT_ONLY|" "$REPORT_ONLY/cells.tsv" >"$REPORT_ONLY/cells.here.tsv"
    render "$REPORT_ONLY/cells.here.tsv" "$out" "${meta_args[@]}" >/dev/null
    say "wrote $out from $REPORT_ONLY"
    exit 0
fi

started_s=$(date +%s)
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if ! git diff --quiet HEAD -- src crates Cargo.toml 2>/dev/null; then
    rev="$rev + uncommitted changes"
fi

while IFS= read -r line; do
    [[ "$line" == INFERGATE_VLLM_*=* ]] && export "${line?}"
done < <(scripts/setup-vllm.sh) || true
[[ -x "${INFERGATE_VLLM_PYTHON:-}" && -n "${INFERGATE_VLLM_SERVE:-}" && -d "${INFERGATE_VLLM_MODEL:-}" ]] ||
    die "scripts/setup-vllm.sh did not print INFERGATE_VLLM_PYTHON / _SERVE / _MODEL"
vllm="$(dirname "$INFERGATE_VLLM_PYTHON")/vllm"
[[ -x "$vllm" ]] || die "no vllm beside $INFERGATE_VLLM_PYTHON"
model_dir=$INFERGATE_VLLM_MODEL
served=SmolLM2-135M-Instruct-Q4_1
url="http://127.0.0.1:$PORT"
venv_env=(HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 VLLM_TARGET_DEVICE=cpu)
vllm_version=$(env "${venv_env[@]}" "$INFERGATE_VLLM_PYTHON" -c 'import vllm; print(vllm.__version__)' 2>/dev/null | tail -n 1) ||
    vllm_version=unknown

work=$(mktemp -d)
serve_pgid=""
cleanup() {
    if [[ -n "$serve_pgid" ]]; then
        kill -TERM -- "-$serve_pgid" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 -- "-$serve_pgid" 2>/dev/null || break
            sleep 0.2
        done
        kill -KILL -- "-$serve_pgid" 2>/dev/null || true
    fi
    if [[ "$KEEP" == 1 ]]; then
        say "work directory kept: $work"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT

if curl -s -o /dev/null --max-time 2 "$url/health"; then
    die "something already answers on 127.0.0.1:$PORT; pick another PORT"
fi
say "starting vLLM on 127.0.0.1:$PORT ($INFERGATE_VLLM_SERVE ${SERVE_FLAGS})"
# setsid: the server (vllm-serve.sh execs `vllm serve`; its engine core is a
# child) gets a process group of its own, which cleanup stops as a whole.
read -r -a serve_flags <<<"$SERVE_FLAGS"
setsid "$INFERGATE_VLLM_SERVE" --port "$PORT" "${serve_flags[@]}" >"$work/serve.log" 2>&1 </dev/null &
serve_pid=$!
sleep 0.5
serve_pgid=$(ps -o pgid= -p "$serve_pid" | tr -d ' ') || serve_pgid=""
[[ "$serve_pgid" == "$serve_pid" ]] || {
    serve_pgid=""
    kill "$serve_pid" 2>/dev/null || true
    die "the server did not get a process group of its own"
}
for i in $(seq 1 600); do
    curl -fs -o /dev/null --max-time 2 "$url/health" && break
    kill -0 "$serve_pid" 2>/dev/null || {
        tail -n 20 "$work/serve.log" >&2
        die "vLLM exited while starting"
    }
    ((i < 600)) || die "vLLM did not answer $url/health within 10 minutes"
    sleep 1
done
say "vLLM up after $(($(date +%s) - started_s)) s"

ig_run() { # OUTDIR CONCURRENCY REQUESTS WARMUP
    # --scrape-interval 0: /metrics read only after the warmup and after the
    # last request, so the server's timers cover the measured requests only.
    "$bin" run --target "$url" --out "$1" --quiet --scrape-interval 0 \
        --tokenizer "$model_dir/tokenizer.json" \
        --prompt-tokens "$PROMPT" --tolerance-percent 5 --max-tokens "$OUTPUT" --output fixed \
        --requests "$3" --concurrency "$2" --warmup "$4" --cache unique --seed "$SEED"
}

say "warmup: 2 infergate requests (they also measure the chat template)"
ig_run "$work/warmup" 1 2 0 >"$work/warmup.log" 2>&1 || {
    tail -n 20 "$work/warmup.log" >&2
    die "the warmup run failed"
}
template=$(python3 - "$work/warmup/run.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["cells"][0]
print(int((c.get("prompt_cache") or {}).get("template_tokens") or 0))
PY
)
vllm_input=${VLLM_INPUT_LEN:-$((PROMPT - template))}
say "chat template: $template tokens; vLLM --random-input-len $vllm_input"

vllm_run() { # CONCURRENCY RESULT_FILENAME
    (cd "$work" && env "${venv_env[@]}" "$vllm" bench serve \
        --backend openai-chat --endpoint /v1/chat/completions --base-url "$url" \
        --model "$served" --tokenizer "$model_dir" \
        --dataset-name random --random-input-len "$vllm_input" --random-output-len "$OUTPUT" \
        --random-range-ratio 0 --ignore-eos --temperature 0 \
        --num-prompts "$REQUESTS" --max-concurrency "$1" --request-rate inf --num-warmups 0 \
        --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 \
        --save-result --save-detailed --result-dir "$work" --result-filename "$2" \
        --seed "$SEED" --disable-tqdm)
}

scrape() { # FILE
    curl -fs --max-time 10 "$url/metrics" >"$1" || die "GET $url/metrics failed"
}

manifest="$work/cells.tsv"
: >"$manifest"
idx=0
for c in "${cells[@]}"; do
    if ((idx % 2 == 0)); then order="infergate vllm"; else order="vllm infergate"; fi
    ig_s="" v_s="" ig_rc=0 v_rc=0
    for tool in $order; do
        t0=$(date +%s)
        # The server's own timers around each tool's run (a third source), and
        # the CPU the client itself used (it shares the server's two cores).
        scrape "$work/metrics-$tool-c$c-before.txt"
        TIMEFORMAT='%U %S'
        if [[ $tool == infergate ]]; then
            say "c=$c: infergate run, $REQUESTS requests"
            { time ig_run "$work/ig-c$c" "$c" "$REQUESTS" "$c" >"$work/ig-c$c.log" 2>&1 || ig_rc=$?; } 2>"$work/cpu-$tool-c$c.txt"
            ig_s=$(($(date +%s) - t0))
            ((ig_rc == 0)) || say "c=$c: infergate exited $ig_rc (see the table)"
        else
            say "c=$c: vllm bench serve, $REQUESTS requests"
            { time vllm_run "$c" "vllm-c$c.json" >"$work/vllm-c$c.log" 2>&1 || v_rc=$?; } 2>"$work/cpu-$tool-c$c.txt"
            v_s=$(($(date +%s) - t0))
            ((v_rc == 0)) || say "c=$c: vllm bench serve exited $v_rc (see the table)"
        fi
        scrape "$work/metrics-$tool-c$c-after.txt"
    done
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$(sed "s/ / then /; s/vllm/vLLM/" <<<"$order")" "$ig_rc" "$ig_s" "$v_rc" "$v_s" "$work" >>"$manifest"
    idx=$((idx + 1))
done

load_end=$(cut -d' ' -f1-3 /proc/loadavg)
elapsed=$(($(date +%s) - started_s))
cmd="PORT=$PORT REQUESTS=$REQUESTS CELLS=\"$CELLS\" PROMPT=$PROMPT OUTPUT=$OUTPUT SEED=$SEED BOOT=$BOOT"
[[ "$SERVE_FLAGS" == "--no-enable-prefix-caching" ]] || cmd="$cmd SERVE_FLAGS=\"$SERVE_FLAGS\""
[[ -z "${VLLM_INPUT_LEN:-}" ]] || cmd="$cmd VLLM_INPUT_LEN=$VLLM_INPUT_LEN"
[[ -z "${INFERGATE:-}" ]] || cmd="$cmd INFERGATE=$INFERGATE"
cmd="$cmd scripts/bench-vllm.sh $out"

meta_args=("started=$started" "elapsed=$elapsed" "rev=$rev" "cmd=$cmd" "vllm_version=$vllm_version"
    "nproc=$(nproc)" "load_start=$load_start" "load_end=$load_end" "requests=$REQUESTS"
    "prompt=$PROMPT" "output=$OUTPUT" "template=$template" "vllm_input=$vllm_input"
    "boot=$BOOT" "seed=$SEED" "serve_flags=$SERVE_FLAGS" "bin=$bin")
printf '%s\n' "${meta_args[@]}" >"$work/meta.args"
render "$manifest" "$out" "${meta_args[@]}"
