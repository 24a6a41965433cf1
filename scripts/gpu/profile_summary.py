#!/usr/bin/env python3
"""Where a thread kind's CPU went, from an async-profiler collapsed profile taken with `threads`.

    profile_summary.py PROFILE.collapsed --interval-us 100 --kind 'REST=^\\[?qtp' --kind 'gRPC=grpc-(loop|default-worker)'

For each kind (a label and a regular expression on the thread frame, the first of each stack):
its samples, then their split by layer (the kernel, the forward call in the native bridge, the
HTTP servers and gRPC, protobuf, the service's Java, the JVM), the kernel's time by system call,
and the top frames (self). A profile of a whole run is mostly its longest phase; the summary is
small enough to carry back from a GPU host where the raw profile is not.
"""
import argparse
import collections
import re


def layer(frames):
    leaf = frames[-1]
    if any(f.endswith("_[k]") for f in frames):
        return "kernel"
    joined = ";".join(frames)
    if "NativeBridge" in joined and not leaf.startswith(("java/", "jdk/", "io/", "org/", "com/")):
        return "forward call (native: delegate, CUDA, the completion wait)"
    if "io/grpc/netty/shaded/io/netty" in leaf:
        return "Netty (gRPC's transport)"
    if leaf.startswith("io/grpc/"):
        return "grpc-java"
    if "protobuf" in leaf or "/grpc/protocol/" in leaf:
        return "protobuf"
    if leaf.startswith("org/eclipse/jetty"):
        return "Jetty"
    if leaf.startswith("io/etserve/"):
        return "the service's Java"
    if leaf.startswith("tools/jackson") or leaf.startswith("com/fasterxml"):
        return "Jackson"
    return "JDK, JVM and other libraries"


def syscall(frames):
    for i, f in enumerate(frames):
        if f == "do_syscall_64_[k]" and i + 1 < len(frames):
            return frames[i + 1].removesuffix("_[k]")
    return "interrupts and other kernel entries"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("profile")
    p.add_argument("--interval-us", type=float, required=True)
    p.add_argument("--kind", action="append", required=True, help="LABEL=REGEX on the thread frame")
    p.add_argument("--top", type=int, default=15)
    a = p.parse_args()
    kinds = [(k.split("=", 1)[0], re.compile(k.split("=", 1)[1])) for k in a.kind]
    samples = {label: collections.Counter() for label, _ in kinds}
    layers = {label: collections.Counter() for label, _ in kinds}
    calls = {label: collections.Counter() for label, _ in kinds}
    leaves = {label: collections.Counter() for label, _ in kinds}
    with open(a.profile) as f:
        for line in f:
            stack, _, n = line.rstrip("\n").rpartition(" ")
            if not stack:
                continue
            frames = stack.split(";")
            for label, rx in kinds:
                if rx.search(frames[0]):
                    n = int(n)
                    samples[label]["all"] += n
                    lay = layer(frames[1:] or frames)
                    layers[label][lay] += n
                    if lay == "kernel":
                        calls[label][syscall(frames)] += n
                    leaves[label][frames[-1]] += n
                    break
    for label, _ in kinds:
        total = samples[label]["all"]
        print(f"### {label}: {total} samples, {total * a.interval_us / 1e6:.1f} s of CPU")
        if not total:
            continue
        for name, n in layers[label].most_common():
            print(f"  {100 * n / total:5.1f} %  {name}")
        print("  kernel by system call:")
        for name, n in calls[label].most_common(6):
            print(f"  {100 * n / total:5.1f} %    {name}")
        print("  top frames (self):")
        for name, n in leaves[label].most_common(a.top):
            print(f"  {100 * n / total:5.1f} %    {name[:140]}")
        print()


if __name__ == "__main__":
    main()
