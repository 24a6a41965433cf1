package io.etserve.bench;

import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import tools.jackson.databind.json.JsonMapper;

/**
 * A closed-loop load generator for {@code POST /v2/models/{model}/infer} on 127.0.0.1: each of
 * {@code --concurrency} threads owns one keep-alive connection and sends its next request as
 * soon as the previous response is in. Every response is checked (status 200, the reference's
 * outputs, their values within the reference tolerance); a mismatch counts as an error.
 *
 * <p>Always bounded: by {@code --duration} (at most {@value #MAX_DURATION_S} s) and by
 * {@code --requests} (at most {@value #MAX_REQUESTS}), whichever ends first, plus a warmup of at
 * most {@value #MAX_WARMUP_S} s whose requests are checked but not measured. Latency is the time
 * from writing the request to having read the whole response, in microseconds.
 *
 * <pre>
 * java -cp &lt;test classpath&gt; io.etserve.bench.LoadGenerator --url http://127.0.0.1:8080 \
 *     --model demo-portable --format binary --concurrency 2 --warmup 5 --duration 15
 * </pre>
 */
public final class LoadGenerator {

    static final int MAX_DURATION_S = 600;
    static final int MAX_WARMUP_S = 120;
    static final long MAX_REQUESTS = 50_000_000L;
    static final int MAX_CONCURRENCY = 64;
    private static final int ERROR_SAMPLES = 5;
    private static final JsonMapper JSON = JsonMapper.builder().build();

    record Options(int port, String model, Path reference, InferPayloads.Format format, int concurrency,
            double warmupSeconds, double durationSeconds, long requests, int timeoutMillis, String label,
            Path jsonOut, OptionalLong serverPid, boolean echo, int checkEvery, int grpcPort, long pauseMicros,
            boolean grpcDeadline) {}

    /** One worker's tallies; only its own thread writes them until the run ends. */
    private static final class Worker {
        final int index;
        long[] latenciesNanos = new long[1 << 14];
        int measured;
        long errors;
        long warmupRequests;
        long warmupErrors;
        long lastCompletionNanos;
        long bodyBytes;    // request and response bodies, measured window
        long tensorBytes;  // raw tensor data those bodies carried
        LoopbackHttpConnection connection;
        io.grpc.ManagedChannel channel;  // --format grpc: one HTTP/2 connection per worker
        io.etserve.grpc.protocol.GRPCInferenceServiceGrpc.GRPCInferenceServiceBlockingStub grpc;

        Worker(int index) {
            this.index = index;
        }

        void record(long nanos) {
            if (measured == latenciesNanos.length) {
                latenciesNanos = Arrays.copyOf(latenciesNanos, measured * 2);
            }
            latenciesNanos[measured++] = nanos;
        }
    }

    private LoadGenerator() {}

    public static void main(String[] args) throws Exception {
        Options options;
        try {
            options = parse(args);
        } catch (IllegalArgumentException e) {
            System.err.println("LoadGenerator: " + e.getMessage());
            System.err.println(usage());
            System.exit(64);
            return;
        }
        Map<String, Object> result = run(options);
        System.out.println(summaryLine(result));
        if (options.jsonOut() != null) {
            Files.writeString(options.jsonOut(), JSON.writeValueAsString(result) + "\n", StandardCharsets.UTF_8,
                    StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        }
        boolean clean = ((Number) result.get("errors")).longValue() == 0
                && ((Number) result.get("warmup_errors")).longValue() == 0
                && ((Number) result.get("requests")).longValue() > 0;
        System.exit(clean ? 0 : 1);
    }

    static Map<String, Object> run(Options o) throws InterruptedException {
        try (InferPayloads payloads = new InferPayloads(Reference.load(o.reference()), o.format(), o.model(), o.port(),
                o.concurrency())) {
            return run(o, payloads);
        }
    }

    private static Map<String, Object> run(Options o, InferPayloads payloads) throws InterruptedException {
        long start = System.nanoTime();
        long warmEnd = start + (long) (o.warmupSeconds() * 1e9);
        long end = warmEnd + (long) (o.durationSeconds() * 1e9);
        AtomicLong measuredBudget = new AtomicLong(o.requests());
        Map<String, Long> errorSamples = new ConcurrentHashMap<>();
        Worker[] workers = new Worker[o.concurrency()];
        Thread[] threads = new Thread[o.concurrency()];
        for (int w = 0; w < workers.length; w++) {
            Worker worker = new Worker(w);
            if (o.format() == InferPayloads.Format.GRPC) {
                worker.channel = io.grpc.Grpc.newChannelBuilderForAddress("127.0.0.1", o.grpcPort(),
                        io.grpc.InsecureChannelCredentials.create()).maxInboundMessageSize(256 << 20).build();
                worker.grpc = io.etserve.grpc.protocol.GRPCInferenceServiceGrpc.newBlockingStub(worker.channel);
            } else {
                worker.connection = new LoopbackHttpConnection(o.port(), o.timeoutMillis());
            }
            workers[w] = worker;
            int firstCase = w % payloads.cases();
            threads[w] = new Thread(() -> drive(worker, payloads, o, firstCase, warmEnd, end, measuredBudget,
                    errorSamples), "load-" + w);
            threads[w].setDaemon(true);
        }
        for (Thread t : threads) {
            t.start();
        }
        sleepUntil(warmEnd);
        long cpuAtWarmEnd = clientCpuNanos();
        Optional<ProcessCounters> serverAtWarmEnd = serverCounters(o.serverPid());
        ThreadCpu serverThreadsAtWarmEnd = o.serverPid().isPresent() ? ThreadCpu.snapshot(o.serverPid().getAsLong()) : null;
        // Bounded: every HTTP exchange by the socket timeout, a gRPC call by its deadline when it
        // carries one; a worker still in a call past this gives the run up.
        long joinDeadline = end + (o.timeoutMillis() + 5_000L) * 1_000_000L;
        for (Thread t : threads) {
            t.join(Math.max(1, (joinDeadline - System.nanoTime()) / 1_000_000L));
            if (t.isAlive()) {
                System.err.println("LoadGenerator: " + t.getName() + " did not finish in time; giving up");
                System.exit(3);
            }
        }
        long cpuUsed = clientCpuNanos() - cpuAtWarmEnd;
        Optional<ProcessCounters> serverAtEnd = serverCounters(o.serverPid());
        OptionalLong serverCpuUsed = serverAtWarmEnd.isPresent() && serverAtEnd.isPresent()
                ? OptionalLong.of((serverAtEnd.get().cpuTicks() - serverAtWarmEnd.get().cpuTicks())
                        * (1_000_000_000L / ThreadCpu.TICKS_PER_SECOND))
                : OptionalLong.empty();
        Map<String, Object> summary = summarize(o, workers, warmEnd, cpuUsed, serverCpuUsed, errorSamples);
        if (serverThreadsAtWarmEnd != null) {
            summary.put("server_cpu_us_per_request_by_thread", ThreadCpu.snapshot(o.serverPid().getAsLong())
                    .perCallSince(serverThreadsAtWarmEnd, (Long) summary.get("requests")));
        }
        if (serverCpuUsed.isPresent()) {
            summary.put("server_per_request",
                    serverAtEnd.get().perCallSince(serverAtWarmEnd.get(), (Long) summary.get("requests")));
        }
        return summary;
    }

    /** One exchange: null error when the response matched, its body's bytes, when it arrived (before the check). */
    private record Exchanged(String error, long responseBytes, long doneNanos) {}

    /**
     * Sends case {@code c} over the worker's connection (HTTP or gRPC) and checks the answer.
     * Values are checked when {@code checkValues} (every checkEvery-th response, all by default);
     * the others by status only, so a large tensor's check does not starve the server of CPU on
     * a small machine.
     */
    private static Exchanged exchange(Worker worker, InferPayloads payloads, Options o, int c, boolean checkValues)
            throws IOException {
        if (worker.grpc != null) {
            // No deadline unless asked: Triton's clients and h2load send none, and with one the
            // server arms and cancels a timer for every call. A call that never ends stops the run
            // at the join deadline instead.
            var stub = o.grpcDeadline()
                    ? worker.grpc.withDeadlineAfter(o.timeoutMillis(), java.util.concurrent.TimeUnit.MILLISECONDS)
                    : worker.grpc;
            var response = stub.modelInfer(payloads.grpcRequest(c));
            long done = System.nanoTime();
            return new Exchanged(checkValues ? payloads.checkGrpc(c, response) : null, response.getSerializedSize(), done);
        }
        LoopbackHttpConnection.Response response = worker.connection.exchange(payloads.request(c, worker.index));
        long done = System.nanoTime();
        String error = o.echo() ? payloads.checkEcho(c, response)
                : checkValues ? payloads.check(c, worker.index, response)
                : response.status() == 200 ? null : "HTTP " + response.status();
        return new Exchanged(error, response.body().length, done);
    }

    private static void drive(Worker worker, InferPayloads payloads, Options o, int firstCase, long warmEnd,
            long end, AtomicLong measuredBudget, Map<String, Long> errorSamples) {
        int next = firstCase;
        long exchanged = 0;
        try {
            while (true) {
                long sent = System.nanoTime();
                if (sent - end >= 0) {
                    return;
                }
                boolean measured = sent - warmEnd >= 0;
                if (measured && measuredBudget.getAndDecrement() <= 0) {
                    return;
                }
                int c = next;
                next = (next + 1) % payloads.cases();
                String error;
                try {
                    Exchanged x = exchange(worker, payloads, o, c, exchanged++ % o.checkEvery() == 0);
                    error = x.error();
                    if (measured && error == null) {
                        worker.record(x.doneNanos() - sent);
                        worker.bodyBytes += payloads.bodyLength(c) + x.responseBytes();
                        worker.tensorBytes += o.echo() ? 2 * payloads.inputBytes(c) : payloads.tensorBytes(c);
                    }
                    if (measured) {
                        worker.lastCompletionNanos = x.doneNanos();
                    }
                } catch (IOException | RuntimeException e) {
                    error = e.getClass().getSimpleName() + ": " + e.getMessage();
                    if (measured) {
                        worker.lastCompletionNanos = System.nanoTime();
                    }
                    pause(); // a refused connection would otherwise spin
                }
                if (o.pauseMicros() > 0) {
                    // A client that thinks between calls: the server's threads go idle in between,
                    // as they do while a GPU works, and pay for waking up.
                    java.util.concurrent.locks.LockSupport.parkNanos(o.pauseMicros() * 1000L);
                }
                if (measured) {
                    worker.errors += error == null ? 0 : 1;
                } else {
                    worker.warmupRequests++;
                    worker.warmupErrors += error == null ? 0 : 1;
                }
                if (error != null && (errorSamples.size() < ERROR_SAMPLES || errorSamples.containsKey(error))) {
                    errorSamples.merge(error, 1L, Long::sum);
                }
            }
        } finally {
            if (worker.connection != null) {
                worker.connection.close();
            }
            if (worker.channel != null) {
                worker.channel.shutdownNow();
            }
        }
    }

    private static Map<String, Object> summarize(Options o, Worker[] workers, long warmEnd, long clientCpuNanos,
            OptionalLong serverCpuNanos, Map<String, Long> errorSamples) {
        int total = 0;
        long errors = 0;
        long warmupRequests = 0;
        long warmupErrors = 0;
        long connects = 0;
        long lastCompletion = warmEnd;
        long bodyBytes = 0;
        long tensorBytes = 0;
        for (Worker w : workers) {
            bodyBytes += w.bodyBytes;
            tensorBytes += w.tensorBytes;
            total += w.measured;
            errors += w.errors;
            warmupRequests += w.warmupRequests;
            warmupErrors += w.warmupErrors;
            connects += w.connection != null ? w.connection.connects() : 1;
            lastCompletion = Math.max(lastCompletion, w.lastCompletionNanos);
        }
        long[] all = new long[total];
        int at = 0;
        for (Worker w : workers) {
            System.arraycopy(w.latenciesNanos, 0, all, at, w.measured);
            at += w.measured;
        }
        Arrays.sort(all);
        double windowSeconds = (lastCompletion - warmEnd) / 1e9;
        long requests = total + errors;
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("label", o.label());
        r.put("model", o.model());
        r.put("format", o.format().name().toLowerCase(Locale.ROOT));
        r.put("concurrency", o.concurrency());
        r.put("pause_us", o.pauseMicros());
        r.put("requests", requests);
        r.put("errors", errors);
        r.put("warmup_requests", warmupRequests);
        r.put("warmup_errors", warmupErrors);
        r.put("connections_opened", connects);
        r.put("window_s", round(windowSeconds, 3));
        r.put("throughput_rps", windowSeconds > 0 ? round(requests / windowSeconds, 1) : 0.0);
        r.put("echo", o.echo());
        r.put("body_mb_per_s", windowSeconds > 0 ? round(bodyBytes / windowSeconds / 1e6, 1) : 0.0);
        r.put("tensor_mb_per_s", windowSeconds > 0 ? round(tensorBytes / windowSeconds / 1e6, 1) : 0.0);
        r.put("p50_us", percentileMicros(all, 0.50));
        r.put("p90_us", percentileMicros(all, 0.90));
        r.put("p99_us", percentileMicros(all, 0.99));
        r.put("max_us", all.length == 0 ? 0.0 : round(all[all.length - 1] / 1e3, 1));
        r.put("client_cpu_us_per_request", requests > 0 ? round(clientCpuNanos / 1e3 / requests, 1) : 0.0);
        serverCpuNanos.ifPresent(n -> r.put("server_cpu_us_per_request", requests > 0 ? round(n / 1e3 / requests, 1) : 0.0));
        r.put("error_samples", errorSamples);
        return r;
    }

    /** Nearest-rank percentile in microseconds; 0 when nothing succeeded. */
    static double percentileMicros(long[] sortedNanos, double p) {
        if (sortedNanos.length == 0) {
            return 0.0;
        }
        int rank = (int) Math.ceil(p * sortedNanos.length);
        return round(sortedNanos[Math.max(0, rank - 1)] / 1e3, 1);
    }

    private static String summaryLine(Map<String, Object> r) {
        return String.format(Locale.ROOT,
                "%s %s %s c=%s: %s requests, %s errors (warmup %s/%s), %s req/s, %s tensor MB/s, p50 %s us, p90 %s us,"
                        + " p99 %s us, max %s us, %s connections, client CPU %s us/req%s%s",
                r.get("label"), r.get("model"), r.get("format"), r.get("concurrency"), r.get("requests"),
                r.get("errors"), r.get("warmup_errors"), r.get("warmup_requests"), r.get("throughput_rps"),
                r.get("tensor_mb_per_s"),
                r.get("p50_us"), r.get("p90_us"), r.get("p99_us"), r.get("max_us"), r.get("connections_opened"),
                r.get("client_cpu_us_per_request"),
                r.containsKey("server_cpu_us_per_request") ? ", server CPU " + r.get("server_cpu_us_per_request") + " us/req" : "",
                ((Map<?, ?>) r.get("error_samples")).isEmpty() ? "" : "\n  errors seen: " + r.get("error_samples"));
    }

    private static long clientCpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }

    /** The server's counters from /proc (Linux); empty without a server pid or when it cannot be read. */
    private static Optional<ProcessCounters> serverCounters(OptionalLong pid) {
        return pid.isPresent() ? ProcessCounters.read(pid.getAsLong()) : Optional.empty();
    }

    private static void sleepUntil(long deadline) throws InterruptedException {
        long left;
        while ((left = deadline - System.nanoTime()) > 0) {
            Thread.sleep(Math.max(1, left / 1_000_000L));
        }
    }

    private static void pause() {
        try {
            Thread.sleep(1);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static double round(double v, int digits) {
        double scale = Math.pow(10, digits);
        return Math.round(v * scale) / scale;
    }

    static Options parse(String[] args) {
        Map<String, String> a = new LinkedHashMap<>();
        for (int i = 0; i < args.length; i++) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("expected --option value pairs, got " + args[i]);
            }
            a.put(args[i].substring(2), args[++i]);
        }
        List<String> known = List.of("url", "model", "reference", "format", "concurrency", "warmup", "duration",
                "requests", "timeout-ms", "label", "json-out", "server-pid", "echo", "check-every", "grpc-port",
                "pause-us", "grpc-deadline");
        List<String> unknown = new ArrayList<>(a.keySet());
        unknown.removeAll(known);
        if (!unknown.isEmpty()) {
            throw new IllegalArgumentException("unknown options " + unknown);
        }
        URI url = URI.create(a.getOrDefault("url", "http://127.0.0.1:8080"));
        if (!"http".equals(url.getScheme()) || !"127.0.0.1".equals(url.getHost()) || url.getPort() <= 0) {
            throw new IllegalArgumentException("--url must be http://127.0.0.1:<port>; this tool targets loopback only");
        }
        String model = a.getOrDefault("model", "demo-portable");
        if (!model.matches("[A-Za-z0-9_.-]+")) {
            throw new IllegalArgumentException("bad model name " + model);
        }
        Path reference = a.containsKey("reference") ? Path.of(a.get("reference"))
                : TestPaths.demoModels().resolve(model).resolve("1").resolve("reference.json");
        InferPayloads.Format format = switch (a.getOrDefault("format", "json")) {
            case "json" -> InferPayloads.Format.JSON;
            case "binary" -> InferPayloads.Format.BINARY;
            case "grpc" -> InferPayloads.Format.GRPC;
            case "shm" -> InferPayloads.Format.SHM;
            case "cuda-shm" -> InferPayloads.Format.CUDA_SHM;
            default -> throw new IllegalArgumentException("--format is json, binary, grpc, shm or cuda-shm");
        };
        int concurrency = (int) bounded(a, "concurrency", 1, 1, MAX_CONCURRENCY);
        double warmup = boundedSeconds(a, "warmup", 5, MAX_WARMUP_S);
        double duration = boundedSeconds(a, "duration", 10, MAX_DURATION_S);
        if (duration <= 0) {
            throw new IllegalArgumentException("--duration must be positive");
        }
        long requests = bounded(a, "requests", MAX_REQUESTS, 1, MAX_REQUESTS);
        int timeout = (int) bounded(a, "timeout-ms", 10_000, 1, 60_000);
        OptionalLong pid = a.containsKey("server-pid") ? OptionalLong.of(Long.parseLong(a.get("server-pid")))
                : OptionalLong.empty();
        boolean echo = Boolean.parseBoolean(a.getOrDefault("echo", "false"));
        int checkEvery = (int) bounded(a, "check-every", 1, 1, 1_000_000);
        return new Options(url.getPort(), model, reference, format, concurrency, warmup, duration, requests, timeout,
                a.getOrDefault("label", "rest"), a.containsKey("json-out") ? Path.of(a.get("json-out")) : null, pid,
                echo, checkEvery, (int) bounded(a, "grpc-port", 8001, 1, 65535), bounded(a, "pause-us", 0, 0, 1_000_000),
                Boolean.parseBoolean(a.getOrDefault("grpc-deadline", "false")));
    }

    private static long bounded(Map<String, String> a, String key, long dflt, long min, long max) {
        long v = a.containsKey(key) ? Long.parseLong(a.get(key)) : dflt;
        if (v < min || v > max) {
            throw new IllegalArgumentException("--" + key + " must be in [" + min + ", " + max + "]");
        }
        return v;
    }

    private static double boundedSeconds(Map<String, String> a, String key, double dflt, double max) {
        String raw = a.getOrDefault(key, Double.toString(dflt));
        double v = Double.parseDouble(raw.endsWith("s") ? raw.substring(0, raw.length() - 1) : raw);
        if (v < 0 || v > max) {
            throw new IllegalArgumentException("--" + key + " must be in [0, " + max + "] seconds");
        }
        return v;
    }

    private static String usage() {
        return "usage: LoadGenerator [--url http://127.0.0.1:8080] [--model demo-portable] [--format json|binary|grpc|shm|cuda-shm]\n"
                + "  [--concurrency 1] [--warmup 5] [--duration 10] [--requests N] [--timeout-ms 10000]\n"
                + "  [--reference models/<model>/1/reference.json] [--label rest] [--json-out FILE] [--server-pid PID]\n"
                + "  [--echo true (the target is bench EchoServer: the request body comes back)] [--check-every N]\n"
                + "  [--grpc-port 8001 (--format grpc: raw tensors to inference.GRPCInferenceService on 127.0.0.1)]\n"
                + "  [--format shm: each tensor in a /dev/shm region, the service started with"
                + " --etserve.shared-memory.enabled=true; cuda-shm: in device memory of device 0, on a GPU host]\n"
                + "  [--grpc-deadline false (true: each gRPC call carries --timeout-ms as its deadline)]\n"
                + "  [--pause-us 0 (each client waits this long after each answer before its next request)]";
    }
}
