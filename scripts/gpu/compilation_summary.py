#!/usr/bin/env python3
"""What the JIT did over a service's run, from -XX:+PrintCompilation lines in its log.

Why compiled code goes: HotSpot (JDK 25) prints each compilation and, when an nmethod stops being
used, "made not entrant: <reason>" ("not used": replaced by a higher tier; "uncommon trap": a
speculation failed; "marked for deoptimization": a dependency broke, e.g. a class loaded that a
compiled call relied on being absent). JFR's deoptimization events name only the uncommon traps,
so a method recompiled at C2 minutes into a run with none in sight needs this log.

Prints the compilations and the reasons code went per time bucket of the JVM's uptime, and, for
each window given, every C2 compilation in it with what had happened to that method before:
whether an earlier C2 version existed and why the latest one went. Methods are told apart by
name and bytecode size. With --class-log (a unified log of
class+load with the uptime decorator), the classes loaded per bucket too.
Stdlib only: runs on the GPU host's Python.
"""
import argparse
import collections
import re
import sys

# "<uptime ms> <compile id> <flags> <tier> <method> [@ bci] (<n> bytes) [made not entrant: why]", the
# flags a fixed field of five columns (% s ! b n) that may hold spaces ("% !")
LINE = re.compile(r"^\s*(\d+)\s+(\d+)\s+([%sbn!][%sbn! ]*?)?\s*([0-4])\s+(\S+)(.*)$")
SIZE = re.compile(r"\((\d+) bytes\)")
CLASS_LOAD = re.compile(r"^\[(\d+(?:\.\d+)?)s\](?:\[[^]]*\])*\s+(\S+)")  # -Xlog:class+load:file=F:uptime


class Event:
    """One PrintCompilation line: a compilation, or compiled code going ("made not entrant")."""

    __slots__ = ("ms", "compile_id", "tier", "method", "osr", "reason")

    def __init__(self, ms, compile_id, tier, method, osr, reason):
        self.ms, self.compile_id, self.tier, self.method, self.osr, self.reason = ms, compile_id, tier, method, osr, reason

    @property
    def gone(self):
        return self.reason is not None


def parse(path):
    events = []
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            ms, compile_id, flags, tier, name, rest = m.groups()
            if "COMPILE SKIPPED" in rest or rest.rstrip().endswith("blocked"):
                continue  # not compiled: given up, or left when the JVM exits
            size = SIZE.search(rest)
            # Overloads share a name: the bytecode size tells most of them apart
            method = f"{name} ({size.group(1)} bytes)" if size else name
            reason = rest.split("made not entrant:", 1)[1].strip() if "made not entrant:" in rest else None
            events.append(Event(int(ms), int(compile_id), int(tier), method, "%" in (flags or ""), reason))
    return events


def buckets(events, width_s):
    table = collections.defaultdict(collections.Counter)
    for e in events:
        b = e.ms // (width_s * 1000)
        if e.gone:
            table[b][f"gone: {e.reason}"] += 1
        else:
            table[b]["OSR" if e.osr else f"tier {e.tier}"] += 1
    return table


def print_buckets(events, width_s, class_loads):
    table = buckets(events, width_s)
    loads = collections.Counter(int(t // width_s) for t, _ in class_loads)
    keys = sorted({k for c in table.values() for k in c}, key=lambda k: (k.startswith("gone"), k))
    head = ["uptime s"] + keys + (["classes loaded"] if class_loads else [])
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for b in range(0, max(list(table) + list(loads) + [0]) + 1):
        row = [f"{b * width_s}-{(b + 1) * width_s}"] + [str(table[b].get(k, 0)) for k in keys]
        if class_loads:
            row.append(str(loads.get(b, 0)))
        print("| " + " | ".join(row) + " |")


def history(events, method, before_ms):
    """What became of the method's C2 code compiled before before_ms, the latest one: (kind, text)."""
    earlier = [e for e in events if e.method == method and e.ms < before_ms and e.tier == 4 and not e.osr]
    compiled = [e for e in earlier if not e.gone]
    if not compiled:
        return "first C2 version", "first C2 version"
    last = compiled[-1]
    went = [e for e in earlier if e.gone and e.compile_id == last.compile_id]
    if went:
        return (f"the last went: {went[-1].reason}",
                f"C2 version #{len(compiled) + 1}; the last went at {went[-1].ms / 1000:.1f} s: {went[-1].reason}")
    return "no earlier one printed as gone", f"C2 version #{len(compiled) + 1}; the last not printed as gone"


def print_window(events, label, since_ms, until_ms, class_loads, limit):
    inside = [e for e in events if since_ms <= e.ms < until_ms]
    compiled = [e for e in inside if not e.gone]
    gone = collections.Counter(e.reason for e in inside if e.gone)
    tiers = collections.Counter("OSR" if e.osr else f"tier {e.tier}" for e in compiled)
    print(f"\n### {label}: uptime {since_ms / 1000:.1f}-{until_ms / 1000:.1f} s")
    print(f"compilations: {len(compiled)} ({', '.join(f'{k} {v}' for k, v in sorted(tiers.items())) or 'none'}); "
          f"code gone: {', '.join(f'{k} {v}' for k, v in gone.most_common()) or 'none'}")
    why = collections.Counter()
    c2 = [e for e in compiled if e.tier == 4 and not e.osr]
    for i, e in enumerate(c2):
        kind, text = history(events, e.method, e.ms)
        why[kind] += 1
        if i < limit:
            print(f"  {e.ms / 1000:8.1f} s  {e.method}: {text}")
    if len(c2) > limit:
        print(f"  ... {len(c2) - limit} more")
    if why:
        print("C2 compilations by what came before: " + ", ".join(f"{k} {v}" for k, v in why.most_common()))
    loaded = [name for t, name in class_loads if since_ms <= t * 1000 < until_ms]
    if class_loads:
        print(f"classes loaded in the window: {len(loaded)}" + (f" ({', '.join(loaded[:10])}{' ...' if len(loaded) > 10 else ''})" if loaded else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log", help="the service's log, with -XX:+PrintCompilation's lines")
    ap.add_argument("--window", action="append", default=[], metavar="LABEL:SINCE:UNTIL",
                    help="a span of the JVM's uptime, in seconds")
    ap.add_argument("--bucket", type=int, default=30, help="seconds per row of the uptime table (30)")
    ap.add_argument("--class-log", help="-Xlog:class+load with the uptime decorator")
    ap.add_argument("--limit", type=int, default=40, help="C2 compilations listed per window (40)")
    args = ap.parse_args()
    events = parse(args.log)
    if not events:
        print(f"no PrintCompilation lines in {args.log}")
        return 1
    class_loads = []
    if args.class_log:
        with open(args.class_log, errors="replace") as f:
            class_loads = [(float(m.group(1)), m.group(2)) for m in map(CLASS_LOAD.match, f) if m]
    print(f"Compilations by {args.bucket} s of uptime (tier 0: native wrappers, 1-3: C1, 4: C2; OSR: on-stack "
          f"replacement; 'gone': made not entrant, and why)\n")
    print_buckets(events, args.bucket, class_loads)
    for w in args.window:
        label, since, until = w.rsplit(":", 2)
        print_window(events, label, float(since) * 1000, float(until) * 1000, class_loads, args.limit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
