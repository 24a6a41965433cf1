#!/usr/bin/env python3
"""What the JIT did while a benchmark ran, from HotSpot's unified log (any JRE, no jdk.jfr needed):

    java -Xlog:jit+compilation=debug,deoptimization=debug:file=jit.log:uptime,tags ...
    python3 bench/jit-log-summary.py jit.log [--window 8] [--from SECONDS] [--to SECONDS]

Prints compilations per window of JVM uptime (C1 = tiers 1-3, C2 = tier 4, OSR apart), the
deoptimizations, and what tells a warm-up tail from a loop: methods C2 compiled three times or more
(recompilation after deoptimization), OSR compiles and uncommon traps after --from, and the methods
C2 compiled for the first time after --from (a warm-up tail: each appears once).
"""
from __future__ import annotations

import argparse
import collections
import re
import sys

COMPILE = re.compile(r"^\[(?P<t>[\d.]+)s\]\[jit,compilation\s*\]\s+(?P<id>\d+)\s+(?P<flags>[%sbn! ]*?)\s*(?P<level>[0-4])\s+"
                     r"(?P<method>\S+)(?P<osr> @ \d+)?.*?(?P<entrant>made not entrant: (?P<why>.*))?$")
DEOPT = re.compile(r"^\[(?P<t>[\d.]+)s\]\[deoptimization\s*\]\s+cid=\s*\d+\s+(?P<osr>osr )?\s*level=(?P<level>\d)\s+"
                   r"(?P<method>\S+)\s+trap_bci=(?P<bci>\d+)\s+(?:osr_bci=\d+\s+)?(?P<reason>\S+)\s+(?P<action>\S+)")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--window", type=float, default=8.0, help="seconds of JVM uptime per row")
    ap.add_argument("--from", dest="start", type=float, default=0.0, help="uptime where the measured load began")
    ap.add_argument("--to", dest="end", type=float, default=float("inf"), help="uptime where it ended")
    a = ap.parse_args()

    per_window: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    c2_times: collections.Counter = collections.Counter()
    first_c2_after: list[str] = []
    seen_c2: set[str] = set()
    osr_after: collections.Counter = collections.Counter()
    traps_after: collections.Counter = collections.Counter()
    not_entrant: collections.Counter = collections.Counter()
    with open(a.log, errors="replace") as f:
        for line in f:
            m = COMPILE.match(line)
            if m:
                t = float(m["t"])
                w = int(t // a.window)
                if m["entrant"]:
                    if m["why"].strip() not in ("not used", "OSR invalidation of lower level"):
                        not_entrant[m["why"].strip()] += 1
                    continue
                level = int(m["level"])
                osr = bool(m["osr"]) or "%" in m["flags"]
                kind = ("C2" if level == 4 else "C1") + (" OSR" if osr else "")
                per_window[w][kind] += 1
                inside = a.start <= t <= a.end
                if level == 4 and not osr:
                    c2_times[m["method"]] += 1
                    if m["method"] not in seen_c2 and inside:
                        first_c2_after.append(m["method"])
                    seen_c2.add(m["method"])
                if osr and inside:
                    osr_after[(m["method"], level)] += 1
                continue
            m = DEOPT.match(line)
            if m:
                t = float(m["t"])
                per_window[int(t // a.window)]["deopt"] += 1
                if a.start <= t <= a.end:
                    traps_after[(m["method"], m["reason"], m["action"])] += 1

    kinds = ["C1", "C2", "C1 OSR", "C2 OSR", "deopt"]
    print(f"JIT log {a.log}: events per {a.window:g} s of JVM uptime")
    print("| uptime s | " + " | ".join(kinds) + " |")
    print("|---" * (len(kinds) + 1) + "|")
    for w in sorted(per_window):
        row = per_window[w]
        print(f"| {w * a.window:g}-{(w + 1) * a.window:g} | " + " | ".join(str(row[k]) for k in kinds) + " |")
    window = f"uptime {a.start:g}-{a.end:g} s"
    print(f"\nmethods C2-compiled for the first time in {window}: {len(first_c2_after)}"
          + (f" (e.g. {', '.join(first_c2_after[:6])})" if first_c2_after else ""))
    loops = [(n, m) for m, n in c2_times.items() if n >= 3]
    print(f"methods C2-compiled 3+ times over the whole run (recompilation loops): {len(loops)}")
    for n, m in sorted(loops, reverse=True)[:15]:
        print(f"  {n} x {m}")
    print(f"OSR compiles in {window}: {sum(osr_after.values())}")
    for (m, level), n in osr_after.most_common(10):
        print(f"  {n} x tier {level} {m}")
    print(f"uncommon traps (deoptimizations) in {window}: {sum(traps_after.values())}")
    for (m, reason, action), n in traps_after.most_common(15):
        print(f"  {n} x {m} {reason} {action}")
    if not_entrant:
        print("made not entrant, other reasons: " + ", ".join(f"{k} ({v})" for k, v in not_entrant.most_common(8)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
