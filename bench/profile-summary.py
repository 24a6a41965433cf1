#!/usr/bin/env python3
"""Where a request's server CPU goes, from async-profiler's collapsed stacks (bench/wrk.sh with
BENCH_PROFILE=1): microseconds per request by thread family, and within the threads that serve
requests by what the CPU did (the forward call, the kernel's socket and wait calls, then the
library whose code ran).

Usage: profile-summary.py INTERVAL LABEL FILE REQUESTS [LABEL FILE REQUESTS ...]
INTERVAL as async-profiler's interval option reads it: 500us, 1ms, or a bare number of nanoseconds.
One column per label (the collapsed stacks and the requests served while each ran; profiles of
one label, e.g. the rounds of a row, are pooled: their samples over their requests). Each sample
stands for INTERVAL of CPU time (async-profiler's cpu event samples on CPU time, so samples x
interval / requests is CPU per request, the profiler's own cost included).
"""
import collections
import re
import sys

# A thread's family from the name async-profiler gives it ("[qtp123-45 tid=678]").
THREADS = [
    ("JIT", r"C\d CompilerThre"),
    ("GC", r"GC Thread|G1 |VM Thread"),
    ("Jetty (selectors, request threads)", r"qtp|jetty"),
    ("gRPC event loops", r"grpc-loop"),
    ("gRPC workers", r"grpc-\d"),
]
SERVING = {"Jetty (selectors, request threads)", "gRPC event loops", "gRPC workers"}

# In the serving threads: the forward call first (its native code and the delegates' threads it
# waits for), then the kernel's calls, named by the C library's function that entered the kernel
# (the frame before entry_SYSCALL_64: the kernel's own syscall frames are often inlined away),
# then the library of the leaf-most frame that is neither the JDK's nor the JVM's (a HashMap's
# time is its caller's).
FORWARD = re.compile(r"io/etserve/runtime/NativeBridge")
SYSCALLS = [
    ("kernel: socket write", r"write|send"),
    ("kernel: socket read", r"read|recv"),
    ("kernel: epoll wait", r"epoll"),
    ("kernel: futex (park, wake)", r"futex|sem_|lll_|pthread_cond"),
    ("kernel: other", r""),
]
LIBRARIES = [
    ("etserve", r"^io/etserve/"),
    ("Jetty", r"^org/eclipse/jetty/"),
    ("Netty", r"^io/grpc/netty/shaded/io/netty/"),
    ("grpc-java", r"^io/grpc/"),
    ("protobuf", r"^com/google/protobuf/"),
    ("Jackson", r"^(com/fasterxml|tools)/jackson/"),
    ("Spring", r"^org/springframework/"),
    ("Micrometer, Resilience4j", r"^(io/micrometer|io/github/resilience4j)/"),
]
ORDER = ["forward call (native)"] + [n for n, _ in SYSCALLS] + [n for n, _ in LIBRARIES] + ["JDK, JVM, other"]


def thread_family(name):
    return next((family for family, pattern in THREADS if re.search(pattern, name)), "other threads")


def what_ran(frames):
    if any(FORWARD.search(f) for f in frames):
        return "forward call (native)"
    entry = next((i for i, f in enumerate(frames) if f.startswith("entry_SYSCALL_64")), None)
    if entry is not None:
        caller = frames[entry - 1] if entry > 0 else ""
        return next(name for name, pattern in SYSCALLS if re.search(pattern, caller))
    for frame in reversed(frames):
        for name, pattern in LIBRARIES:
            if re.search(pattern, frame):
                return name
    return "JDK, JVM, other"


def profile(path):
    families, serving = collections.Counter(), collections.Counter()
    for line in open(path):
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack:
            continue
        frames = stack.split(";")
        family = thread_family(frames[0])
        families[family] += int(count)
        if family in SERVING:
            serving[what_ran(frames[1:])] += int(count)
    return families, serving


def microseconds(interval):
    value, unit = re.fullmatch(r"([0-9.]+)(ns|us|ms|s)?", interval).groups()
    return float(value) * {"ns": 1e-3, "us": 1, "ms": 1e3, "s": 1e6, None: 1e-3}[unit]


def main():
    interval_us = microseconds(sys.argv[1])
    pooled = {}
    args = sys.argv[2:]
    for label, path, requests in zip(args[0::3], args[1::3], args[2::3]):
        families, serving = profile(path)
        f, s, n = pooled.setdefault(label, (collections.Counter(), collections.Counter(), [0]))
        f.update(families)
        s.update(serving)
        n[0] += int(requests)
    columns = [(label, f, s, n[0]) for label, (f, s, n) in pooled.items()]
    per = lambda n, requests: f"{n * interval_us / requests:.1f}"
    shown = lambda counts: any(c[0] * interval_us / c[1] >= 0.05 for c in counts)
    print("| us per request | " + " | ".join(c[0] for c in columns) + " |")
    print("|---|" + "---|" * len(columns))
    print("| **all threads** | " + " | ".join(per(sum(f.values()), n) for _, f, _, n in columns) + " |")
    for family in [f for f, _ in THREADS] + ["other threads"]:
        if shown([(f[family], n) for _, f, _, n in columns]):
            print(f"| {family} | " + " | ".join(per(f[family], n) for _, f, _, n in columns) + " |")
    print("| **serving threads, by what ran** | " + " | ".join("" for _ in columns) + " |")
    for what in ORDER:
        if shown([(s[what], n) for _, _, s, n in columns]):
            print(f"| {what} | " + " | ".join(per(s[what], n) for _, _, s, n in columns) + " |")


if __name__ == "__main__":
    main()
