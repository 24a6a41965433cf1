"""Medians (and quartiles) of bench/tracing-cpu.sh's slices per service, model and format."""
import json
import re
import statistics
import sys
from collections import defaultdict

# The threads that serve a request: Jetty's (qtp) for REST, gRPC's executor and transport for gRPC.
REQUEST_THREADS = re.compile(r"^(qtp|grpc-)")


def thread_cpu(by_thread, pattern):
    """Sums the "name=us" entries (thread names hold spaces) whose name matches."""
    return sum(float(us) for name, us in re.findall(r"\s*(.+?)=([0-9.]+)(?=\s|$)", by_thread)
               if pattern.match(name))


def request_thread_cpu(by_thread):
    return thread_cpu(by_thread, REQUEST_THREADS)


# A slice in which the JIT compiler still worked (over 5 us per request) measured the JIT and
# the machine's other load as much as the request path: the second table leaves those out.
COMPILER = re.compile(r"^C# CompilerThre")


rows = defaultdict(lambda: defaultdict(list))
settled = defaultdict(lambda: defaultdict(list))
for line in open(sys.argv[1]):
    s = json.loads(line)
    if s["errors"]:
        sys.exit(f"a slice saw errors: {line}")
    key = (s["model"], s["format"], s["label"])
    by_thread = s.get("server_cpu_us_per_request_by_thread", "")
    if thread_cpu(by_thread, COMPILER) <= 5:
        settled[key]["all"].append(s["server_cpu_us_per_request"])
        settled[key]["req"].append(request_thread_cpu(by_thread))
        settled[key]["p50"].append(s["p50_us"])
        settled[key]["client"].append(s["client_cpu_us_per_request"])
    rows[key]["all"].append(s["server_cpu_us_per_request"])
    rows[key]["req"].append(request_thread_cpu(s.get("server_cpu_us_per_request_by_thread", "")))
    rows[key]["p50"].append(s["p50_us"])
    rows[key]["client"].append(s["client_cpu_us_per_request"])


def q(values):
    qs = statistics.quantiles(values, n=4) if len(values) > 1 else values * 3
    return f"{statistics.median(values):.1f} ({qs[0]:.1f}-{qs[2]:.1f})"


def table(title, data):
    print(f"{title}\n")
    print("| model | format | service | slices | server CPU us/req | request threads us/req | p50 us | client CPU us/req |")
    print("|---|---|---|---|---|---|---|---|")
    order = ["before", "off", "on"]
    for (model, fmt, label), r in sorted(data.items(), key=lambda kv: (kv[0][0], kv[0][1], order.index(kv[0][2]))):
        print(f"| {model} | {fmt} | {label} | {len(r['all'])} | {q(r['all'])} | {q(r['req'])} | {q(r['p50'])}"
              f" | {q(r['client'])} |")
    print()


table("All slices: median (quartiles)", rows)
table("Slices without JIT work (compiler threads at most 5 us per request)", settled)
