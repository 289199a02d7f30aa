#!/usr/bin/env python3
"""Print the timing table of one scripts/test-timings.sh run as Markdown.

Reads DIR/phases.tsv (phase, seconds), DIR/binaries.tsv (one line per test
binary, from scripts/time-test-binary.sh) and DIR/test.log (libtest's
--report-time lines: `test NAME ... ok <1.234s>`).
"""
import re
import sys
from pathlib import Path

SLOWEST = 20


def main(d: Path) -> None:
    phases = [l.split("\t") for l in (d / "phases.tsv").read_text().splitlines() if l.strip()]
    print("| phase | wall s |\n|---|---:|")
    for name, secs in phases:
        print(f"| {name} | {float(secs):.0f} |")
    rows = []
    for line in (d / "binaries.tsv").read_text().splitlines():
        f = line.split("\t")
        if len(f) < 6:
            continue
        name, wall, user, sys_, rss, busy = f[:6]
        rows.append((name, float(wall), float(user) + float(sys_), float(busy), int(rss)))
    total = [sum(r[i] for r in rows) for i in (1, 2, 3)]
    print("\n| test binary | wall s | CPU s (own) | CPU s (machine) | max RSS MiB |\n|---|---:|---:|---:|---:|")
    for name, wall, cpu, busy, rss in sorted(rows, key=lambda r: -r[1]):
        print(f"| {name} | {wall:.1f} | {cpu:.1f} | {busy:.1f} | {rss / 1024:.0f} |")
    print(f"| **{len(rows)} binaries** | **{total[0]:.0f}** | **{total[1]:.0f}** | **{total[2]:.0f}** | |")
    tests = []
    pat = re.compile(r"^test (\S+) \.\.\. (\w+) <([0-9.]+)s>")
    running = re.compile(r"^\s*Running .*\((?:\S*/)?(\S+?)(?:-[0-9a-f]{16})?\)$")
    binary = "?"
    for line in (d / "test.log").read_text(errors="replace").splitlines():
        if m := running.match(line):
            binary = m[1]
        elif m := pat.match(line):
            tests.append((float(m[3]), f"{binary}: {m[1]}", m[2]))
    tests.sort(reverse=True)
    print(f"\n{len(tests)} tests timed; the {SLOWEST} slowest:\n\n| test | s |\n|---|---:|")
    for secs, name, status in tests[:SLOWEST]:
        print(f"| {name}{'' if status == 'ok' else ' (' + status + ')'} | {secs:.1f} |")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "target/test-timings"))
