#!/usr/bin/env python3
"""Changes one random byte of a program at a time and runs each changed file through the
first-call trial's program (etserve-first-call), as the service would before loading it.

    python3 bench/fuzz-programs.py PROGRAM [--count N] [--seed S] [--library LIB] [--keep DIR]

Every changed file runs in three settings of the trial's process: alone; with another delegate
library loaded (LIB: another set of mappings beside the program's); with one CPU thread and
malloc tunables that move the heap. A fault that happens in some of them and not in others
depends on the memory layout, which differs again inside the service's JVM. Each setting runs
twice: fenced (the trial as the service runs it) and mapped (`--mapped 1`: the files mapped as
the service maps them, no fences). Prints one line per file that faulted or hung, then counts.

Needs the native build (`mvn package` or `native/build.sh build`).
"""
import argparse
import collections
import os
import random
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRIAL = os.path.join(ROOT, "target/native-stage/META-INF/etserve/native/linux-x86_64/etserve-first-call")
PROBE = os.path.join(ROOT, "target/native/testing/caller_stream_probe/libetserve_test_caller_stream_probe.so")
HANG_SECONDS = 5


def run(path, extra, env, mapped):
    command = [TRIAL, "--program", path, "--method", "forward", "--verification", "1"] + extra
    if mapped:
        command += ["--mapped", "1"]
    try:
        r = subprocess.run(command, capture_output=True, timeout=HANG_SECONDS, env={**os.environ, **env})
    except subprocess.TimeoutExpired:
        return "hang"
    if r.returncode < 0:
        return "signal %d" % -r.returncode
    return {0: "ran", 10: "refused", 11: "not tried"}.get(r.returncode, "status %d" % r.returncode)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("program")
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--library", default=PROBE, help="another delegate library for the second setting")
    p.add_argument("--keep", help="directory to keep the files that faulted or hung in")
    a = p.parse_args()
    data = open(a.program, "rb").read()
    rng = random.Random(a.seed)
    settings = [
        ("alone", ["--cpu-threads", "2"], {}),
        ("with a library", ["--cpu-threads", "2", "--library", os.path.realpath(a.library)], {}),
        ("moved heap", ["--cpu-threads", "1"], {"MALLOC_TOP_PAD_": "67108864", "MALLOC_MMAP_THRESHOLD_": "4096"}),
    ]
    candidate = os.path.join(a.keep or "/tmp", "fuzz-programs-candidate-%d.pte" % os.getpid())
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
    counts = collections.Counter()
    for _ in range(a.count):
        offset, value = rng.randrange(len(data)), rng.randrange(256)
        if data[offset] == value:
            continue
        changed = bytearray(data)
        changed[offset] = value
        with open(candidate, "wb") as f:
            f.write(changed)
        counts["files"] += 1
        for mode, mapped in (("fenced", False), ("mapped", True)):
            outcomes = [run(candidate, extra, env, mapped) for _, extra, env in settings]
            faulted = [o.startswith("signal") or o == "hang" for o in outcomes]
            if not any(faulted):
                counts["%s: %s" % (mode, outcomes[0])] += 1
                continue
            kind = "faults or hangs in every setting" if all(faulted) else "faults or hangs in some settings"
            counts["%s: %s" % (mode, kind)] += 1
            print("byte %d -> %d, %s: %s" % (offset, value, mode, ", ".join(
                "%s %s" % (name, o) for (name, _, _), o in zip(settings, outcomes))), flush=True)
            if a.keep and mode == "fenced":
                with open(os.path.join(a.keep, "%d-%d.pte" % (offset, value)), "wb") as f:
                    f.write(changed)
    os.remove(candidate)
    print("\n%s, %d changed files, seed %d:" % (os.path.relpath(a.program, ROOT), counts.pop("files", 0), a.seed))
    for key in sorted(counts):
        print("  %-40s %d" % (key, counts[key]))


if __name__ == "__main__":
    sys.exit(main())
