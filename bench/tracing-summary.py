"""Medians (and quartiles) of bench/tracing-cpu.sh's slices per service, model and format."""
import json
import re
import statistics
import sys
from collections import defaultdict

# The threads that serve a request: Jetty's (qtp) for REST, gRPC's executor and transport for gRPC.
REQUEST_THREADS = re.compile(r"^(qtp|grpc-)")


def request_thread_cpu(by_thread):
    total = 0.0
    for part in by_thread.split(" "):
        name, _, us = part.rpartition("=")
        if REQUEST_THREADS.match(name):
            total += float(us)
    return total


rows = defaultdict(lambda: defaultdict(list))
for line in open(sys.argv[1]):
    s = json.loads(line)
    if s["errors"]:
        sys.exit(f"a slice saw errors: {line}")
    key = (s["model"], s["format"], s["label"])
    rows[key]["all"].append(s["server_cpu_us_per_request"])
    rows[key]["req"].append(request_thread_cpu(s.get("server_cpu_us_per_request_by_thread", "")))
    rows[key]["p50"].append(s["p50_us"])
    rows[key]["client"].append(s["client_cpu_us_per_request"])


def q(values):
    qs = statistics.quantiles(values, n=4) if len(values) > 1 else values * 3
    return f"{statistics.median(values):.1f} ({qs[0]:.1f}-{qs[2]:.1f})"


print("| model | format | service | slices | server CPU us/req | request threads us/req | p50 us | client CPU us/req |")
print("|---|---|---|---|---|---|---|---|")
for (model, fmt, label), r in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1], ["before", "off", "on"].index(kv[0][2]))):
    print(f"| {model} | {fmt} | {label} | {len(r['all'])} | {q(r['all'])} | {q(r['req'])} | {q(r['p50'])} | {q(r['client'])} |")
