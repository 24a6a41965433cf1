package io.etserve.bench;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Checks the packaged service on a GPU host over real HTTP and gRPC (scripts/gpu-suite.sh
 * service): the service runs the application jar with the GPU bridge and the test-only probe delegate, whose model
 * answers {@code [selection seen, stream handle, GPU work queued]} and spins a kernel for x[0] us.
 *
 * <pre>
 * GpuServiceCheck health     port=8080 mgmt=8081
 * GpuServiceCheck handshake  port=8080 model=probe clients=16 calls=200 expect=16 [mgmt=8081 [waits-before=0]]
 *                            (with mgmt: etserve_gpu_completion_waits_total must have counted every call)
 * GpuServiceCheck grpc       grpc-port=8001 model=probe clients=16 calls=50 expect=16
 * GpuServiceCheck throughput port=8080 model=probe spin=2000 clients=16 seconds=5 pid=1234 [pause-us=0] [grpc-port=8001]
 *                            [warmup=8 jit-calls=30000 learn=1] [grpc-deadline-s=0] [mgmt=8081]
 *                            (pause-us: each client waits that long after each answer, so the service
 *                            idles between calls as it does while a GPU works, without the GPU;
 *                            grpc-port: ModelInfer calls with raw tensors, a channel per client, instead of REST;
 *                            warmup/jit-calls: at most that many seconds or calls of a short kernel first,
 *                            then learn seconds of the measured kernel (at least 2 x seconds: its last
 *                            seconds measured too, stderr); grpc-deadline-s: each gRPC call
 *                            with a deadline of that many whole seconds, as a client setting one sends it (0: none, as
 *                            tritonclient and perf_analyzer send by default); mgmt: the window's span of the
 *                            service's uptime on stderr, "[window] LABEL: the service's uptime A-B s")
 * GpuServiceCheck batching   port=8080 mgmt=8081 model=probe-batched rows=1 spin=2000 clients=16 seconds=4 pid=1234
 * GpuServiceCheck fault      port=8080 mgmt=8081 model=probe-fault cpu-model=demo-xnnpack
 *                            [gpu-model=cuda-resnet18 gpu-reference=.../reference.json] (refused after the fault too)
 *                            [fault-spin=3000000 within-ms=2000] (GPU work past etserve.cuda.completion-timeout instead)
 * GpuServiceCheck sigterm    port=8080 model=probe pid=1234 calls=4 spin=800000
 * GpuServiceCheck first      port=8080 model=probe spin=2000 label="no warm-up"
 * </pre>
 * Each prints one markdown table row (or a few lines) and exits non-zero when a check fails.
 */
public final class GpuServiceCheck {

    private static final Pattern DATA = Pattern.compile("\"data\"\\s*:\\s*\\[([^\\]]*)\\]");
    private static final Pattern STATUS = Pattern.compile("\"status\"\\s*:\\s*\"([A-Z_]+)\"");

    public static void main(String[] args) throws Exception {
        Map<String, String> a = options(args);
        boolean ok = switch (args[0]) {
            case "health" -> health(a);
            case "handshake" -> handshake(a);
            case "grpc" -> grpc(a);
            case "throughput" -> throughput(a);
            case "batching" -> batching(a);
            case "fault" -> fault(a);
            case "sigterm" -> sigterm(a);
            case "first" -> first(a);
            default -> throw new IllegalArgumentException("unknown check " + args[0]);
        };
        System.exit(ok ? 0 : 1);
    }

    /** The {@code key=value} arguments after the check's name. */
    static Map<String, String> options(String[] args) {
        Map<String, String> a = new HashMap<>();
        for (int i = 1; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            a.put(kv[0], kv.length > 1 ? kv[1] : "");
        }
        return a;
    }

    private static int port(Map<String, String> a, String key) {
        return Integer.parseInt(a.get(key));
    }

    static byte[] get(int port, String path) {
        return ("GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").getBytes(StandardCharsets.US_ASCII);
    }

    static byte[] probeRequest(String model, float spinMicros) {
        return post(model, "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[2],\"data\":["
                + spinMicros + ",0]}]}");
    }

    /** A JSON inference request to {@code model}, framed for one keep-alive exchange. */
    static byte[] post(String model, String body) {
        byte[] b = body.getBytes(StandardCharsets.US_ASCII);
        String head = "POST /v2/models/" + model + "/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + "Content-Length: " + b.length + "\r\n\r\n";
        byte[] h = head.getBytes(StandardCharsets.US_ASCII);
        byte[] all = Arrays.copyOf(h, h.length + b.length);
        System.arraycopy(b, 0, all, h.length, b.length);
        return all;
    }

    /** The batched probe (float32[rows, 2]): every row asks for the same kernel. */
    static byte[] batchedProbeRequest(String model, float spinMicros, int rows) {
        String data = String.join(",", java.util.Collections.nCopies(rows, spinMicros + ",0"));
        return post(model, "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[" + rows
                + ",2],\"data\":[" + data + "]}]}");
    }

    /** [selection seen, handle, work queued] from a probe response, or null if it is not one. */
    static long[] observed(LoopbackHttpConnection.Response r) {
        if (r.status() != 200) {
            return null;
        }
        Matcher m = DATA.matcher(new String(r.body(), StandardCharsets.UTF_8));
        if (!m.find()) {
            return null;
        }
        return Arrays.stream(m.group(1).split(",")).map(String::trim).mapToLong(Long::parseLong).toArray();
    }

    static int status(int port, String path) throws IOException {
        try (LoopbackHttpConnection c = new LoopbackHttpConnection(port, 30_000)) {
            return c.exchange(get(port, path)).status();
        }
    }

    static String body(int port, String path) throws IOException {
        try (LoopbackHttpConnection c = new LoopbackHttpConnection(port, 30_000)) {
            return new String(c.exchange(get(port, path)).body(), StandardCharsets.UTF_8);
        }
    }

    /** Readiness UP with its cuda and callerStream components UP. */
    static boolean health(Map<String, String> a) throws IOException {
        int mgmt = port(a, "mgmt");
        String readiness = body(mgmt, "/actuator/health/readiness");
        String cuda = component(readiness, "cuda");
        String callerStream = component(readiness, "callerStream");
        int live = status(port(a, "port"), "/v2/health/live");
        int ready = status(port(a, "port"), "/v2/health/ready");
        System.out.printf("| health | readiness %s | cuda %s | callerStream %s | /v2/health/live %d | /v2/health/ready %d |%n",
                status(mgmt, "/actuator/health/readiness"), cuda, callerStream, live, ready);
        return "UP".equals(cuda) && "UP".equals(callerStream) && live == 200 && ready == 200;
    }

    static String component(String health, String name) {
        int i = health.indexOf("\"" + name + "\"");
        if (i < 0) {
            return "missing";
        }
        Matcher m = STATUS.matcher(health.substring(i));
        return m.find() ? m.group(1) : "?";
    }

    /** Concurrent REST calls: each saw a selection, and the handles seen are the pool's streams. */
    static boolean handshake(Map<String, String> a) throws Exception {
        int port = port(a, "port");
        int clients = Integer.parseInt(a.get("clients"));
        int calls = Integer.parseInt(a.get("calls"));
        int expect = Integer.parseInt(a.get("expect"));
        byte[] request = probeRequest(a.get("model"), Float.parseFloat(a.getOrDefault("spin", "200")));
        Set<Long> handles = ConcurrentHashMap.newKeySet();
        AtomicLong unguarded = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        runClients(clients, c -> {
            try (LoopbackHttpConnection conn = new LoopbackHttpConnection(port, 30_000)) {
                for (int i = 0; i < calls; i++) {
                    long[] o = observed(conn.exchange(request));
                    if (o == null) {
                        failed.incrementAndGet();
                    } else if (o[0] != 1) {
                        unguarded.incrementAndGet();
                    } else {
                        handles.add(o[1]);
                    }
                }
            }
        });
        boolean ok = handles.size() == expect && unguarded.get() == 0 && failed.get() == 0;
        String waits = "";
        if (a.containsKey("mgmt")) {
            // Every one of these GPU calls waited adaptively once: the metric counts each by how it ended.
            double counted = completionWaits(port(a, "mgmt"), a.get("model")) - Double.parseDouble(a.getOrDefault("waits-before", "0"));
            ok &= counted == (double) clients * calls;
            waits = String.format(" | etserve_gpu_completion_waits_total %.0f", counted);
        }
        System.out.printf("| handshake | %d clients x %d calls | distinct stream handles %d (streams %d) | unguarded %d "
                + "| failed %d%s | %s |%n", clients, calls, handles.size(), expect, unguarded.get(), failed.get(), waits,
                ok ? "ok" : "FAILED");
        return ok;
    }

    /**
     * The same handshake over gRPC (inference.GRPCInferenceService on {@code grpc-port}): server and
     * model readiness, then concurrent ModelInfer calls with raw tensors, each of which must have
     * run under a caller stream, on as many distinct streams as the pool has.
     */
    static boolean grpc(Map<String, String> a) throws Exception {
        int clients = Integer.parseInt(a.get("clients"));
        int calls = Integer.parseInt(a.get("calls"));
        int expect = Integer.parseInt(a.get("expect"));
        String model = a.get("model");
        float spin = Float.parseFloat(a.getOrDefault("spin", "200"));
        var built = probeMessage(model, spin);
        var channel = io.grpc.Grpc.newChannelBuilderForAddress("127.0.0.1", port(a, "grpc-port"),
                io.grpc.InsecureChannelCredentials.create()).build();
        Set<Long> handles = ConcurrentHashMap.newKeySet();
        AtomicLong unguarded = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        boolean live;
        boolean ready;
        try {
            var stubs = io.etserve.grpc.protocol.GRPCInferenceServiceGrpc.newBlockingStub(channel);
            java.util.function.Supplier<io.etserve.grpc.protocol.GRPCInferenceServiceGrpc.GRPCInferenceServiceBlockingStub> stub =
                    () -> stubs.withDeadlineAfter(30, java.util.concurrent.TimeUnit.SECONDS);  // per call
            live = stub.get().serverLive(io.etserve.grpc.protocol.ServerLiveRequest.getDefaultInstance()).getLive();
            ready = stub.get().modelReady(io.etserve.grpc.protocol.ModelReadyRequest.newBuilder().setName(model).build())
                    .getReady();
            runClients(clients, c -> {
                for (int i = 0; i < calls; i++) {
                    try {
                        var r = stub.get().modelInfer(built);
                        ByteBuffer out = r.getRawOutputContents(0).asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
                        if (out.getLong(0) != 1) {
                            unguarded.incrementAndGet();
                        } else {
                            handles.add(out.getLong(8));
                        }
                    } catch (RuntimeException e) {
                        failed.incrementAndGet();
                    }
                }
            });
        } finally {
            channel.shutdownNow();
        }
        boolean ok = live && ready && handles.size() == expect && unguarded.get() == 0 && failed.get() == 0;
        System.out.printf("| gRPC | live %s, %s ready %s | %d clients x %d ModelInfer | distinct stream handles %d "
                + "(streams %d) | unguarded %d | failed %d | %s |%n", live, model, ready, clients, calls, handles.size(),
                expect, unguarded.get(), failed.get(), ok ? "ok" : "FAILED");
        return ok;
    }

    /** The probe's request as a ModelInfer: x = [spin, 0] as a raw section. */
    static io.etserve.grpc.protocol.ModelInferRequest probeMessage(String model, float spin) {
        var request = io.etserve.grpc.protocol.ModelInferRequest.newBuilder().setModelName(model);
        request.addInputsBuilder().setName("x").setDatatype("FP32").addShape(2);
        request.addRawInputContents(com.google.protobuf.ByteString.copyFrom(ByteBuffer.allocate(8)
                .order(ByteOrder.LITTLE_ENDIAN).putFloat(spin).putFloat(0f).array()));
        return request.build();
    }

    /** The sum over {@code ended} of a model's etserve_gpu_completion_waits_total. */
    static double completionWaits(int mgmt, String model) throws IOException {
        return modelSeries(mgmt, "etserve_gpu_completion_waits_total", model);
    }

    /** The service JVM's start, epoch seconds to the millisecond (Micrometer's process_start_time_seconds). */
    static double jvmStartSeconds(int mgmt) throws IOException {
        Matcher m = Pattern.compile("(?m)^process_start_time_seconds ([0-9.eE+]+)$").matcher(body(mgmt, "/actuator/prometheus"));
        if (!m.find()) {
            throw new IOException("no process_start_time_seconds on the management port " + mgmt);
        }
        return Double.parseDouble(m.group(1));
    }

    /** The sum of every Prometheus series of {@code metric} whose {@code model} label is {@code model}. */
    static double modelSeries(int mgmt, String metric, String model) throws IOException {
        Matcher m = Pattern.compile(Pattern.quote(metric) + "\\{[^}]*model=\"" + Pattern.quote(model)
                + "\"[^}]*\\} ([0-9.eE+]+)").matcher(body(mgmt, "/actuator/prometheus"));
        double sum = 0;
        while (m.find()) {
            sum += Double.parseDouble(m.group(1));
        }
        return sum;
    }

    /** Closed loop for a fixed time: calls/s, latency p50/p99, and the service's CPU per call. */
    static boolean throughput(Map<String, String> a) throws Exception {
        Measured m = measure(a);
        System.out.printf("| %s | %d | %.0f | %.0f | %.0f | %.1f | %.0f | %s | %d |%n", a.getOrDefault("label", "-"),
                m.clients, m.spin, m.perSecond(), pct(m.latencies, 50) / 1e3, pct(m.latencies, 99) / 1e3,
                m.cpuPerCallUs(), m.spin > 0 ? String.format("%.1f", 100 * m.cpuPerCallUs() / m.spin) : "-", m.failed);
        return m.failed == 0 && m.latencies.length > 0;
    }

    /**
     * One-row requests with and without dynamic batching: requests and forward calls per second
     * (nv_inference_exec_count from the management port), so the table shows the calls a batch saves.
     */
    static boolean batching(Map<String, String> a) throws Exception {
        int mgmt = port(a, "mgmt");
        String model = a.get("model");
        Measured m = measure(a, () -> execCount(mgmt, model));
        long calls = m.counted();  // forward calls in the measured window
        long requests = m.latencies.length;
        System.out.printf("| %s | %d | %.0f | %.0f | %.0f | %.2f | %.0f | %.1f | %.0f | %d |%n", a.getOrDefault("label", "-"),
                m.clients, m.spin, m.perSecond(), m.perSecond() * calls / Math.max(1, requests),
                (double) requests / Math.max(1, calls), pct(m.latencies, 50) / 1e3, pct(m.latencies, 99) / 1e3,
                m.cpuPerCallUs(), m.failed);
        return m.failed == 0 && m.latencies.length > 0 && calls > 0;
    }

    static long execCount(int mgmt, String model) throws IOException {
        return (long) modelSeries(mgmt, "nv_inference_exec_count", model);
    }

    record Measured(int clients, float spin, long[] latencies, double seconds, long cpuTicks, long failed,
            long counted) {
        double perSecond() {
            return latencies.length / seconds;
        }

        double cpuPerCallUs() {
            return cpuTicks * 1e6 / ThreadCpu.TICKS_PER_SECOND / Math.max(1, latencies.length);
        }
    }

    /** Closed loop: {@code clients} connections, each sending its next request when the last answered. */
    static Measured measure(Map<String, String> a) throws Exception {
        return measure(a, () -> 0L);
    }

    /** A counter read on the server (nv_inference_exec_count, say) at the window's start and end. */
    interface Counter {
        long read() throws IOException;
    }

    /** As {@link #measure(Map)}, with {@code counter}'s increase over the measured window in {@code counted}. */
    static Measured measure(Map<String, String> a, Counter counter) throws Exception {
        int port = port(a, "port");
        int clients = Integer.parseInt(a.get("clients"));
        float spin = Float.parseFloat(a.get("spin"));
        int rows = Integer.parseInt(a.getOrDefault("rows", "0"));
        byte[] request = rows > 0 ? batchedProbeRequest(a.get("model"), spin, rows) : probeRequest(a.get("model"), spin);
        byte[] shortKernel = rows > 0 ? batchedProbeRequest(a.get("model"), 20f, rows) : probeRequest(a.get("model"), 20f);
        CallsFactory connect = a.containsKey("grpc-port")
                ? grpcCalls(port(a, "grpc-port"), a.get("model"), spin, rows,
                        Long.parseLong(a.getOrDefault("grpc-deadline-s", "0")))
                : () -> httpCalls(new LoopbackHttpConnection(port, 30_000), request, shortKernel);
        // One connection per client for the warm-up and the timed window alike: a window that
        // opened its own would time their setup (and the JIT's work on it) too.
        List<Calls> connections = new ArrayList<>();
        try {
            for (int i = 0; i < clients; i++) {
                connections.add(connect.open());
            }
            return measure(a, counter, connections, spin);
        } finally {
            for (Calls c : connections) {
                c.close();
            }
        }
    }

    private static Measured measure(Map<String, String> a, Counter counter, List<Calls> connections, float spin)
            throws Exception {
        int clients = connections.size();
        double seconds = Double.parseDouble(a.get("seconds"));
        long pid = Long.parseLong(a.get("pid"));
        long pauseNanos = Long.parseLong(a.getOrDefault("pause-us", "0")) * 1000L;
        // Warm-up, not measured. First the JIT: the request path compiles after some ten thousand
        // calls, which a 2 ms kernel at one client takes half a minute to reach, so that part
        // runs a short kernel (`jit-calls` calls at most, `warmup` seconds at most). Then `learn`
        // seconds (1) of the measured kernel at its pace, so the completion wait has learned its duration
        // (and, minutes of it, the JIT has reached the kernel's pace: steady state, not warm-up).
        // Without this, compile threads and interpreted code showed up as CPU per call.
        double jitSeconds = Double.parseDouble(a.getOrDefault("warmup", "8"));
        long jitEnd = System.nanoTime() + (long) (jitSeconds * 1e9);
        long jitCalls = Long.parseLong(a.getOrDefault("jit-calls", "30000"));
        double learnSeconds = Double.parseDouble(a.getOrDefault("learn", "1"));
        AtomicLong warmed = new AtomicLong();
        // A learning phase at least twice the window long is measured over its last `seconds`
        // too, by the same connections at the same pace without the window's bookkeeping: the
        // two should agree, and where they do not, the window measures something of its own.
        boolean tailed = learnSeconds >= 2 * seconds;
        AtomicReference<ThreadCpu> tailStart = new AtomicReference<>();
        AtomicLong tailCalls = new AtomicLong();
        // Bounded by the phases' own length (calls carry no deadline): a server that stops
        // answering fails the row a minute late, not ten.
        runClients(clients, jitSeconds + learnSeconds + 60, (VoidClient) c -> {
            Calls conn = connections.get(c);
            while (System.nanoTime() < jitEnd && warmed.get() < jitCalls) {
                conn.call(true);
                warmed.incrementAndGet();
            }
            long learnEnd = System.nanoTime() + (long) (learnSeconds * 1e9);
            long tailFrom = learnEnd - (long) (seconds * 1e9);
            while (System.nanoTime() < learnEnd) {
                if (tailed && tailStart.get() == null && System.nanoTime() >= tailFrom) {
                    ThreadCpu snapshot = ThreadCpu.snapshot(pid);
                    tailStart.compareAndSet(null, snapshot);
                }
                conn.call(false);
                warmed.incrementAndGet();
                if (tailStart.get() != null) {
                    tailCalls.incrementAndGet();
                }
                if (pauseNanos > 0) {  // the measured traffic's pace, as the window's
                    java.util.concurrent.locks.LockSupport.parkNanos(pauseNanos);
                }
            }
        });
        if (tailStart.get() != null) {
            System.err.printf("[cpu by thread] %s clients=%d kernel=%.0f us, learning's last %.0f s: %s (us per call)%n",
                    a.getOrDefault("label", "-"), clients, spin, seconds,
                    ThreadCpu.snapshot(pid).perCallSince(tailStart.get(), tailCalls.get()));
        }
        AtomicLong failed = new AtomicLong();
        long counted0 = counter.read();
        // With mgmt=: where the window lies in the service's life, for its uptime-stamped logs
        // (PrintCompilation's clock counts from the JVM's start, which Micrometer reports)
        double started = a.containsKey("mgmt") ? jvmStartSeconds(port(a, "mgmt")) : Double.NaN;
        ThreadCpu threads0 = ThreadCpu.snapshot(pid);
        ProcessCounters counters0 = processCounters(pid);
        long windowStartMillis = System.currentTimeMillis();
        long t0 = System.nanoTime();
        long end = t0 + (long) (seconds * 1e9);
        List<long[]> perClient = runClients(clients, seconds + 60, c -> {
            long[] lat = new long[2_000_000];
            int n = 0;
            Calls conn = connections.get(c);
            while (System.nanoTime() < end && n < lat.length) {
                long s = System.nanoTime();
                if (!conn.call(false)) {
                    failed.incrementAndGet();
                }
                lat[n++] = System.nanoTime() - s;
                if (pauseNanos > 0) {
                    java.util.concurrent.locks.LockSupport.parkNanos(pauseNanos);
                }
            }
            return Arrays.copyOf(lat, n);
        });
        double elapsed = (System.nanoTime() - t0) / 1e9;
        if (!Double.isNaN(started)) {  // (the connections' closing comes after it)
            System.err.printf(java.util.Locale.ROOT, "[window] %s: the service's uptime %.3f-%.3f s%n",
                    a.getOrDefault("label", "-"), windowStartMillis / 1e3 - started, System.currentTimeMillis() / 1e3 - started);
        }
        ProcessCounters counters = processCounters(pid);
        long cpu = counters.cpuTicks() - counters0.cpuTicks();
        long counted = counter.read() - counted0;
        long[] all = perClient.stream().flatMapToLong(Arrays::stream).sorted().toArray();
        String byThread = ThreadCpu.snapshot(pid).perCallSince(threads0, all.length);
        String split = counters.perCallSince(counters0, all.length);
        // stderr: the tables stay tables; the suite keeps this beside them
        System.err.printf("[cpu by thread] %s clients=%d kernel=%.0f us: %s (us per call); %s per call%n",
                a.getOrDefault("label", "-"), clients, spin, byThread, split);
        return new Measured(clients, spin, all, elapsed, cpu, failed.get(), counted);
    }

    /**
     * A sticky CUDA fault through REST: both health surfaces 503 and agree, the CPU model still
     * serves. The fault is an illegal address, or with {@code fault-spin=US} GPU work that long,
     * past the service's completion timeout: the call must end by {@code within-ms} (before the
     * work does) and the device count as hung.
     */
    static boolean fault(Map<String, String> a) throws Exception {
        int port = port(a, "port");
        int mgmt = port(a, "mgmt");
        float faultSpin = Float.parseFloat(a.getOrDefault("fault-spin", "-1"));
        long withinMillis = Long.parseLong(a.getOrDefault("within-ms", "60000"));
        int faultStatus;
        long faultMillis;
        try (LoopbackHttpConnection c = new LoopbackHttpConnection(port, 60_000)) {
            long t0 = System.nanoTime();
            faultStatus = c.exchange(probeRequest(a.get("model"), faultSpin)).status();
            faultMillis = (System.nanoTime() - t0) / 1_000_000;
        }
        int gpuAfter;
        try (LoopbackHttpConnection c = new LoopbackHttpConnection(port, 60_000)) {
            gpuAfter = c.exchange(probeRequest(a.get("model"), 0f)).status();
        }
        int cpuAfter;
        String zeros = "[" + String.join(",", java.util.Collections.nCopies(16, "0")) + "]";
        String body = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,16],\"data\":" + zeros + "}]}";
        byte[] b = body.getBytes(StandardCharsets.US_ASCII);
        String head = "POST /v2/models/" + a.get("cpu-model") + "/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                + "Content-Type: application/json\r\nContent-Length: " + b.length + "\r\n\r\n" + body;
        try (LoopbackHttpConnection c = new LoopbackHttpConnection(port, 60_000)) {
            cpuAfter = c.exchange(head.getBytes(StandardCharsets.US_ASCII)).status();
        }
        // Another GPU model on the faulted device (a real CUDA-backend program, say) is refused too.
        int otherGpuAfter = 503;
        if (a.containsKey("gpu-model")) {
            InferPayloads other = new InferPayloads(io.etserve.support.Reference.load(java.nio.file.Path.of(
                    a.get("gpu-reference"))), InferPayloads.Format.BINARY, a.get("gpu-model"), port);
            try (LoopbackHttpConnection c = new LoopbackHttpConnection(port, 60_000)) {
                otherGpuAfter = c.exchange(other.request(0)).status();
            }
        }
        int live = status(port, "/v2/health/live");
        int actuatorLive = status(mgmt, "/actuator/health/liveness");
        int ready = status(port, "/v2/health/ready");
        int actuatorReady = status(mgmt, "/actuator/health/readiness");
        boolean ok = faultStatus == 500 && faultMillis <= withinMillis && gpuAfter == 503 && otherGpuAfter == 503
                && cpuAfter == 200 && live == 503 && actuatorLive == 503 && ready == 503 && actuatorReady == 503;
        System.out.printf("| %s | faulting call %d after %d ms | GPU model after %d%s | CPU model after %d "
                + "| live v2/actuator %d/%d | ready v2/actuator %d/%d | %s |%n",
                faultSpin < 0 ? "sticky fault" : "hung GPU work (" + (long) faultSpin + " us)", faultStatus, faultMillis, gpuAfter,
                a.containsKey("gpu-model") ? ", " + a.get("gpu-model") + " after " + otherGpuAfter : "", cpuAfter, live,
                actuatorLive, ready, actuatorReady, ok ? "ok" : "FAILED");
        return ok;
    }

    /** SIGTERM while GPU calls are in flight: every one of them still answers 200. */
    static boolean sigterm(Map<String, String> a) throws Exception {
        int port = port(a, "port");
        int calls = Integer.parseInt(a.get("calls"));
        long pid = Long.parseLong(a.get("pid"));
        byte[] request = probeRequest(a.get("model"), Float.parseFloat(a.get("spin")));
        ExecutorService exec = Executors.newFixedThreadPool(calls);
        List<Future<Integer>> fs = new ArrayList<>();
        for (int i = 0; i < calls; i++) {
            fs.add(exec.submit(() -> {
                try (LoopbackHttpConnection c = new LoopbackHttpConnection(port, 120_000)) {
                    return c.exchange(request).status();
                }
            }));
        }
        Thread.sleep(300); // the calls are running their kernels now
        ProcessHandle.of(pid).orElseThrow().destroy(); // SIGTERM
        List<Integer> statuses = new ArrayList<>();
        for (Future<Integer> f : fs) {
            try {
                statuses.add(f.get(120, TimeUnit.SECONDS));
            } catch (Exception e) {
                statuses.add(-1);
            }
        }
        exec.shutdown();
        boolean ok = statuses.stream().allMatch(s -> s == 200);
        System.out.printf("| SIGTERM | %d GPU calls in flight | statuses %s | %s |%n", calls, statuses, ok ? "ok" : "FAILED");
        return ok;
    }

    /** The first request after ready, then the second, timed from writing to reading the whole reply. */
    static boolean first(Map<String, String> a) throws Exception {
        byte[] request = probeRequest(a.get("model"), Float.parseFloat(a.get("spin")));
        long[] micros = new long[2];
        boolean ok = true;
        try (LoopbackHttpConnection c = new LoopbackHttpConnection(port(a, "port"), 60_000)) {
            for (int i = 0; i < 2; i++) {
                long t0 = System.nanoTime();
                ok &= observed(c.exchange(request)) != null;
                micros[i] = (System.nanoTime() - t0) / 1000;
            }
        }
        System.out.printf("| first request, %s | %.0f us kernel | first %d us | second %d us | %s |%n",
                a.getOrDefault("label", "-"), Float.parseFloat(a.get("spin")), micros[0], micros[1], ok ? "ok" : "FAILED");
        return ok;
    }

    /** One client's connection for {@link #measure}: a probe call with the measured kernel or the warm-up's short one. */
    interface Calls extends AutoCloseable {
        /** False when the call failed or did not answer as the probe does. */
        boolean call(boolean shortKernel) throws Exception;

        @Override
        void close() throws IOException;
    }

    interface CallsFactory {
        Calls open() throws IOException;
    }

    static Calls httpCalls(LoopbackHttpConnection conn, byte[] request, byte[] shortKernel) {
        return new Calls() {
            @Override
            public boolean call(boolean shortKernel2) throws IOException {
                return observed(conn.exchange(shortKernel2 ? shortKernel : request)) != null;
            }

            @Override
            public void close() throws IOException {
                conn.close();
            }
        };
    }

    /** ModelInfer with the probe's tensor as a raw section, on a channel of its own per client. */
    static CallsFactory grpcCalls(int port, String model, float spin, int rows, long deadlineSeconds) {
        if (rows > 0) {
            throw new IllegalArgumentException("rows= is for REST: the batched probe is not sent over gRPC here");
        }
        var measured = probeMessage(model, spin);
        var shortOne = probeMessage(model, 20f);
        return () -> {
            var channel = io.grpc.Grpc.newChannelBuilderForAddress("127.0.0.1", port,
                    io.grpc.InsecureChannelCredentials.create()).build();
            var stub = io.etserve.grpc.protocol.GRPCInferenceServiceGrpc.newBlockingStub(channel);
            return new Calls() {
                @Override
                public boolean call(boolean shortKernel) {
                    try {
                        var withDeadline = deadlineSeconds > 0 ? stub.withDeadlineAfter(deadlineSeconds, TimeUnit.SECONDS) : stub;
                        return withDeadline.modelInfer(shortKernel ? shortOne : measured).getRawOutputContentsCount() == 1;
                    } catch (RuntimeException e) {
                        return false;
                    }
                }

                @Override
                public void close() {
                    channel.shutdownNow();
                }
            };
        };
    }

    interface Client<T> {
        T run(int index) throws Exception;
    }

    interface VoidClient {
        void run(int index) throws Exception;
    }

    static void runClients(int n, VoidClient client) throws Exception {
        runClients(n, 600, client);
    }

    static void runClients(int n, double seconds, VoidClient client) throws Exception {
        runClients(n, seconds, (Client<Void>) i -> {
            client.run(i);
            return null;
        });
    }

    static <T> List<T> runClients(int n, Client<T> client) throws Exception {
        return runClients(n, 600, client);
    }

    /**
     * Runs {@code n} clients and waits for all of them at most {@code seconds} in all; then their
     * threads are interrupted (a blocked gRPC call is cancelled so) and the wait fails.
     */
    static <T> List<T> runClients(int n, double seconds, Client<T> client) throws Exception {
        ExecutorService exec = Executors.newFixedThreadPool(n);
        try {
            List<Future<T>> fs = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                int index = i;
                fs.add(exec.submit(() -> client.run(index)));
            }
            long deadline = System.nanoTime() + (long) (seconds * 1e9);
            List<T> out = new ArrayList<>();
            for (Future<T> f : fs) {
                out.add(f.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS));
            }
            return out;
        } finally {
            exec.shutdownNow();
        }
    }

    private static long pct(long[] sorted, int p) {
        return sorted.length == 0 ? 0 : sorted[Math.min(sorted.length - 1, (int) Math.ceil(p / 100.0 * sorted.length) - 1)];
    }

    static ProcessCounters processCounters(long pid) throws IOException {
        return ProcessCounters.read(pid).orElseThrow(() -> new IOException("cannot read /proc/" + pid));
    }
}
