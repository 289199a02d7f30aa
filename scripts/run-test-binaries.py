#!/usr/bin/env python3
"""Run the workspace's tests as `cargo test --workspace --all-features` does,
but two test binaries at a time (one per core), the slowest first.

`cargo test` runs its binaries one after another. Here most binaries wait on
a reference-engine server that has one thread (scripts/test.sh), so one binary
leaves a core idle much of the time; two at once keep both busy. Each binary
still runs whole in one process, so the servers it shares among its tests
(tests/support) are shared as before. Its output is printed in one piece when
it ends, headed by the same `Running` line cargo prints, and the doc tests run
as one more job. The last line counts every binary's tests:

    tests: N passed, N failed, N skipped

(skipped: libtest's ignored). Exit status 1 when any job failed, naming it.

    scripts/run-test-binaries.py [--jobs N] [-- ARGS FOR EVERY TEST BINARY]

CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER, when set, wraps each binary as
cargo would (scripts/test-timings.sh times them so).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from pathlib import Path

# Started first, longest first (docs/testing.md has their times); any binary
# not named here follows in cargo's order.
SLOWEST_FIRST = [
    "infergate/test/quality",
    "infergate-report/lib",
    "infergate/test/sizing",
    "infergate/test/vllm",
    "infergate/test/qualify",
    "infergate/test/workloads",
    "infergate/test/features",
    "infergate/test/run",
    "infergate/test/qualify_failures",
    "infergate/test/container",
    "infergate/test/faults",
    "infergate/test/turnover",
    "infergate/test/ledger",
]
RESULT = re.compile(r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored")
CARGO = os.environ.get("CARGO", "cargo")
BUILD = [CARGO, "test", "--workspace", "--all-features"]


def test_binaries():
    """Every test executable of the workspace, built (a no-op when current)."""
    out = subprocess.run(
        BUILD + ["--no-run", "--message-format=json-render-diagnostics"],
        stdout=subprocess.PIPE,
        check=True,
        text=True,
    ).stdout
    jobs = []
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        if not msg["profile"]["test"]:
            continue
        manifest = Path(msg["manifest_path"])
        package = tomllib.loads(manifest.read_text())["package"]["name"]
        target = msg["target"]
        kind = "lib" if "lib" in target["kind"] else target["kind"][0]
        key = f"{package}/lib" if kind == "lib" else f"{package}/{kind}/{target['name']}"
        src = os.path.relpath(target["src_path"], manifest.parent)
        label = f"unittests {src}" if kind in ("lib", "bin") else src
        jobs.append(Job(key, label, [msg["executable"]], manifest.parent, package))
    return jobs


class Job:
    def __init__(self, key, label, argv, cwd, package):
        self.key, self.label, self.argv, self.cwd, self.package = key, label, argv, cwd, package
        self.rc = None
        self.output = ""
        self.seconds = 0.0

    def run(self, extra):
        env = dict(os.environ)
        if self.package:
            env.update(CARGO_MANIFEST_DIR=str(self.cwd), CARGO_PKG_NAME=self.package)
            env["CARGO_CRATE_NAME"] = self.package.replace("-", "_")
        runner = os.environ.get("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER", "").split()
        argv = (runner + self.argv + extra) if self.package else self.argv
        t0 = time.monotonic()
        with tempfile.TemporaryFile("w+") as f:
            self.rc = subprocess.run(argv, cwd=self.cwd, env=env, stdout=f, stderr=subprocess.STDOUT).returncode
            f.seek(0)
            self.output = f.read()
        self.seconds = time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("extra", nargs="*", help="after --: arguments for every test binary")
    args = ap.parse_args()
    root = Path(__file__).resolve().parent.parent
    os.chdir(root)
    jobs = test_binaries()
    rank = {k: i for i, k in enumerate(SLOWEST_FIRST)}
    jobs.sort(key=lambda j: rank.get(j.key, len(rank)))
    jobs.append(Job("doc", "doc tests", BUILD + ["--doc"], root, None))

    queue = list(jobs)
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                job = queue.pop(0)
            job.run(args.extra)
            with lock:
                print(f"     Running {job.label} ({job.argv[-1] if job.package else 'cargo test --doc'})")
                print(job.output, end="" if job.output.endswith("\n") else "\n")
                print(f"run-test-binaries: {job.key} took {job.seconds:.1f} s, exit {job.rc}\n", flush=True)

    threads = [threading.Thread(target=worker) for _ in range(max(1, args.jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    passed = failed = ignored = 0
    for job in jobs:
        for line in job.output.splitlines():
            if m := RESULT.match(line):
                passed, failed, ignored = passed + int(m[1]), failed + int(m[2]), ignored + int(m[3])
    bad = [j.key for j in jobs if j.rc != 0]
    if bad:
        print(f"run-test-binaries: failed: {', '.join(bad)}", file=sys.stderr)
    print(f"tests: {passed} passed, {failed} failed, {ignored} skipped")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
