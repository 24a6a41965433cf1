#!/usr/bin/env python3
"""Where a service's CPU went during a window of a JFR recording, as text.

    jfr_summary.py RECORDING.jfr --jfr PATH/TO/jfr [--since EPOCH_S] [--until EPOCH_S] [--top N]

Reads the recording with the JDK's own `jfr print --json` and reports, for the window only (a
steady load, after warm-up): Java execution samples by thread kind and the hottest frames of the
request threads; native-method samples (time inside JNI calls, e.g. a forward call); the JIT's
compilations and deoptimizations, by method, so a JIT that keeps compiling under a steady load
shows which methods it keeps recompiling and why they were thrown away.
"""
import argparse
import collections
import datetime
import json
import subprocess
import sys

EVENTS = "jdk.ExecutionSample,jdk.NativeMethodSample,jdk.Compilation,jdk.Deoptimization,jdk.CompilationFailure"


def thread_kind(name):
    name = name or ""
    for prefix, kind in (("qtp", "jetty"), ("http", "jetty"), ("grpc", "grpc"), ("etserve-batch", "batcher"),
                         ("C1 ", "jit"), ("C2 ", "jit"), ("GC", "gc"), ("G1", "gc")):
        if name.startswith(prefix):
            return kind
    return "other:" + name.split("-")[0][:24]


def frame(f):
    m = f.get("method") or {}
    t = (m.get("type") or {}).get("name", "?").replace("/", ".")
    return f"{t.rsplit('.', 1)[-1]}.{m.get('name', '?')}"


def method_name(m):
    t = ((m or {}).get("type") or {}).get("name", "?").replace("/", ".")
    return f"{t}.{(m or {}).get('name', '?')}"


def epoch(ts):
    return datetime.datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("recording")
    ap.add_argument("--jfr", default="jfr")
    ap.add_argument("--since", type=float, default=0)
    ap.add_argument("--until", type=float, default=float("inf"))
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args()
    out = subprocess.run([a.jfr, "print", "--json", "--stack-depth", "8", "--events", EVENTS, a.recording],
                         capture_output=True, text=True, check=True).stdout
    events = [e for e in json.loads(out)["recording"]["events"]
              if a.since <= epoch(e["values"]["startTime"]) <= a.until]
    by_type = collections.defaultdict(list)
    for e in events:
        by_type[e["type"]].append(e["values"])
    span = a.until - a.since if a.until != float("inf") else None
    print(f"window: {span:.1f} s" if span else "window: whole recording")

    samples = by_type["jdk.ExecutionSample"]
    kinds = collections.Counter(thread_kind((s.get("sampledThread") or {}).get("javaName")) for s in samples)
    print(f"\nJava execution samples (running Java code): {len(samples)}")
    for k, n in kinds.most_common():
        print(f"  {k:32s} {n:6d}  {100 * n / max(1, len(samples)):5.1f} %")
    request = [s for s in samples if thread_kind((s.get("sampledThread") or {}).get("javaName")) in ("jetty", "grpc")]
    top = collections.Counter(frame(s["stackTrace"]["frames"][0]) for s in request if s.get("stackTrace", {}).get("frames"))
    print(f"\nRequest threads, top frames (self), of {len(request)} samples:")
    for f, n in top.most_common(a.top):
        print(f"  {n:6d}  {100 * n / max(1, len(request)):5.1f} %  {f}")
    stacks = collections.Counter(" < ".join(frame(f) for f in s["stackTrace"]["frames"][:5])
                                 for s in request if s.get("stackTrace", {}).get("frames"))
    print("\nRequest threads, top stacks (5 frames):")
    for st, n in stacks.most_common(8):
        print(f"  {n:6d}  {st}")

    native = by_type["jdk.NativeMethodSample"]
    ntop = collections.Counter(frame(s["stackTrace"]["frames"][0]) for s in native if s.get("stackTrace", {}).get("frames"))
    print(f"\nNative-method samples (threads inside a native call, sleeping or not): {len(native)}")
    for f, n in ntop.most_common(8):
        print(f"  {n:6d}  {f}")

    comps = by_type["jdk.Compilation"]
    total = sum(float(c["duration"][2:-1]) for c in comps if c.get("duration", "").startswith("PT"))
    print(f"\nCompilations in the window: {len(comps)}, {total * 1000:.1f} ms of compiler time"
          + (f" ({total / span * 1000:.1f} ms per second)" if span else ""))
    ctop = collections.Counter((method_name(c.get("method")), c.get("compiler"), c.get("isOsr")) for c in comps)
    for (m, comp, osr), n in ctop.most_common(a.top):
        print(f"  {n:5d}  {comp}{' OSR' if osr else ''}  {m}")
    deopts = by_type["jdk.Deoptimization"]
    print(f"\nDeoptimizations in the window: {len(deopts)}")
    dtop = collections.Counter((method_name(d.get("method")), d.get("reason"), d.get("action"), d.get("lineNumber"))
                               for d in deopts)
    for (m, reason, action, line), n in dtop.most_common(a.top):
        print(f"  {n:5d}  {reason}/{action}  {m}:{line}")
    fails = by_type["jdk.CompilationFailure"]
    if fails:
        print(f"\nCompilation failures in the window: {len(fails)}")
        for msg, n in collections.Counter(f.get("failureMessage") for f in fails).most_common(5):
            print(f"  {n:5d}  {msg}")


if __name__ == "__main__":
    sys.exit(main())
