package io.etserve.bench;

import io.etserve.support.Reference;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * Checks real CUDA-backend programs (exported by scripts/export/export_cuda.py) through the packaged
 * service on a GPU host, over real HTTP and gRPC (scripts/gpu-suite.sh cuda-programs). Values are
 * checked against the PyTorch references written at export time. Correctness and throughput of
 * each model are {@link LoadGenerator}'s job; these are the checks it cannot make:
 *
 * <pre>
 * CudaProgramsCheck health  mgmt=8081 models=cuda-mlp,cuda-resnet18
 *                           (the models component names CudaBackend and places each on a GPU)
 * CudaProgramsCheck mixed   port=8080 model=mixed-probe-cuda reference=DIR/1/reference.json clients=8
 *                           calls=1250 expect=4 [format=json|grpc grpc-port=8001]
 *                           (probe, CUDA partition, probe: every answer right, both probes on the
 *                           call's leased stream, as many distinct streams as the pool has)
 * CudaProgramsCheck reject  port=8080 model=mixed-probe-cuda reference=...
 *                           (a call refused after the CUDA partition ran answers 400 with the
 *                           runtime's reason, and the next calls are right)
 * CudaProgramsCheck cycles  port=8080 mgmt=8081 model=cuda-resnet18 reference=... cycles=20 pid=1234
 *                           [expect=leak] (explicit mode: load, one checked call, unload; device and
 *                           host memory after each cycle; within 1 % after the last, or with
 *                           expect=leak, a growth a delegate known to keep its memory shows)
 * CudaProgramsCheck device-used mgmt=8081            (bytes in use on the first GPU)
 * CudaProgramsCheck exec-count mgmt=8081 model=m     (forward calls of a model so far)
 * CudaProgramsCheck repository port=8080 model=m action=load|unload [expect=refused]
 * </pre>
 * Each prints markdown table rows and exits non-zero when a check fails.
 */
public final class CudaProgramsCheck {

    private static final JsonMapper JSON = JsonMapper.builder().build();
    private static final String CUDA_BACKEND = "CudaBackend";

    private CudaProgramsCheck() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> a = GpuServiceCheck.options(args);
        boolean ok = switch (args[0]) {
            case "health" -> health(a);
            case "mixed" -> mixed(a);
            case "reject" -> reject(a);
            case "cycles" -> cycles(a);
            case "device-used" -> print(deviceUsed(port(a, "mgmt")));
            case "exec-count" -> print(GpuServiceCheck.execCount(port(a, "mgmt"), a.get("model")));
            case "repository" -> {
                String error = repository(port(a, "port"), a.get("model"), a.get("action"), Integer.MAX_VALUE);
                if ("refused".equals(a.get("expect"))) {
                    // The default policy for a delegate that keeps its device memory: 400 with the reason.
                    boolean refused = error != null && error.contains(" 400 ") && error.contains("until the process exits");
                    System.out.printf("| %s %s, unreleased-device-memory=refuse | %s | %s |%n", a.get("action"),
                            a.get("model"), error, refused ? "ok" : "FAILED");
                    yield refused;
                }
                if (error != null) {
                    System.err.println(error);
                }
                yield error == null;
            }
            default -> throw new IllegalArgumentException("unknown check " + args[0]);
        };
        System.exit(ok ? 0 : 1);
    }

    private static boolean print(long value) {
        System.out.println(value);
        return value >= 0;
    }

    private static int port(Map<String, String> a, String key) {
        return Integer.parseInt(a.get(key));
    }

    /** Readiness names CudaBackend among each model's backends and places it on a CUDA device. */
    static boolean health(Map<String, String> a) throws IOException {
        JsonNode models = JSON.readTree(GpuServiceCheck.body(port(a, "mgmt"), "/actuator/health/readiness"))
                .path("components").path("models").path("details").path("models");
        boolean ok = true;
        for (String model : a.get("models").split(",")) {
            JsonNode m = model.contains(":") ? models.path(model) : firstVersion(models, model);
            boolean cuda = false;
            for (JsonNode b : m.path("backends")) {
                cuda |= CUDA_BACKEND.equals(b.asString());
            }
            String placement = m.path("placement").asString("");
            boolean good = "READY".equals(m.path("status").asString()) && cuda && placement.startsWith("cuda:");
            System.out.printf("| health | %s | status %s | backends %s | placement %s | instances %s | %s |%n", model,
                    m.path("status").asString("missing"), m.path("backends"), placement, m.path("instances"),
                    good ? "ok" : "FAILED");
            ok &= good;
        }
        return ok;
    }

    private static JsonNode firstVersion(JsonNode models, String name) {
        for (var e : models.properties()) {
            if (e.getKey().equals(name) || e.getKey().startsWith(name + ":")) {
                return e.getValue();
            }
        }
        return JSON.createObjectNode();
    }

    /**
     * The mixed program under concurrent load. Its first probe partition writes its output with a
     * kernel on the stream it observed, which the CUDA partition's host-to-device copy must
     * follow; its last one writes the program's output the same way, which the runner's
     * completion wait must cover. A probe on any other stream leaves a stale value (the previous
     * call's), so a wrong stream shows as a wrong number; each client walks the cases in order,
     * so two consecutive calls never carry the same input.
     */
    static boolean mixed(Map<String, String> a) throws Exception {
        int port = port(a, "port");
        int clients = Integer.parseInt(a.get("clients"));
        int calls = Integer.parseInt(a.get("calls"));
        int expect = Integer.parseInt(a.get("expect"));
        String model = a.get("model");
        boolean grpc = "grpc".equals(a.getOrDefault("format", "json"));
        InferPayloads payloads = new InferPayloads(Reference.load(Path.of(a.get("reference"))),
                grpc ? InferPayloads.Format.GRPC : InferPayloads.Format.JSON, model, port);
        int n = payloads.cases();
        AtomicLong wrong = new AtomicLong();
        AtomicLong foreign = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        AtomicReference<String> sample = new AtomicReference<>();
        Set<Long> handles = ConcurrentHashMap.newKeySet();
        long t0 = System.nanoTime();
        GpuServiceCheck.runClients(clients, c -> {
            io.grpc.ManagedChannel channel = grpc ? io.grpc.Grpc.newChannelBuilderForAddress("127.0.0.1",
                    port(a, "grpc-port"), io.grpc.InsecureChannelCredentials.create()).build() : null;
            try (LoopbackHttpConnection conn = new LoopbackHttpConnection(port, 30_000)) {
                var stub = grpc ? io.etserve.grpc.protocol.GRPCInferenceServiceGrpc.newBlockingStub(channel) : null;
                for (int i = 0; i < calls; i++) {
                    int k = (c * calls + i) % n;
                    String error;
                    long[][] observed;
                    try {
                        if (grpc) {
                            var r = stub.withDeadlineAfter(30, java.util.concurrent.TimeUnit.SECONDS)
                                    .modelInfer(payloads.grpcRequest(k));
                            error = payloads.checkGrpc(k, r);
                            observed = observedGrpc(r);
                        } else {
                            LoopbackHttpConnection.Response r = conn.exchange(payloads.request(k));
                            if (r.status() != 200) {
                                failed.incrementAndGet();
                                sample.compareAndSet(null, "HTTP " + r.status() + " " + new String(r.body(),
                                        StandardCharsets.UTF_8));
                                continue;
                            }
                            error = payloads.check(k, r);
                            observed = observedJson(r.body());
                        }
                    } catch (RuntimeException e) {
                        failed.incrementAndGet();
                        sample.compareAndSet(null, e.toString());
                        continue;
                    }
                    if (error != null) {
                        wrong.incrementAndGet();
                        sample.compareAndSet(null, "case " + k + ": " + error);
                    }
                    long[] before = observed[0];
                    long[] after = observed[1];
                    if (before == null || after == null || before[0] != 1 || after[0] != 1 || before[1] != after[1]
                            || before[1] <= 2 || before[2] != 1 || after[2] != 1) {
                        // No selection, two different streams in one call, the legacy (0x1) or
                        // per-thread (0x2) default stream, or no work queued on it.
                        foreign.incrementAndGet();
                        sample.compareAndSet(null, "observed " + java.util.Arrays.toString(before) + " then "
                                + java.util.Arrays.toString(after));
                    } else {
                        handles.add(before[1]);
                    }
                }
            } finally {
                if (channel != null) {
                    channel.shutdownNow();
                }
            }
        });
        double seconds = (System.nanoTime() - t0) / 1e9;
        boolean ok = wrong.get() == 0 && foreign.get() == 0 && failed.get() == 0 && handles.size() == expect;
        System.out.printf("| mixed %s | %d clients x %d calls (%.0f calls/s) | wrong results %d | foreign streams %d "
                + "| failed %d | distinct streams %d (pool %d) | %s |%n", grpc ? "gRPC" : "REST", clients, calls,
                clients * calls / seconds, wrong.get(), foreign.get(), failed.get(), handles.size(), expect,
                ok ? "ok" : "FAILED " + sample.get());
        return ok;
    }

    /** observed_before and observed_after of a JSON response (null where absent). */
    private static long[][] observedJson(byte[] body) {
        long[][] out = new long[2][];
        for (JsonNode o : JSON.readTree(body).path("outputs")) {
            int slot = slot(o.path("name").asString());
            if (slot >= 0) {
                long[] v = new long[o.path("data").size()];
                for (int i = 0; i < v.length; i++) {
                    v[i] = o.path("data").get(i).asLong();
                }
                out[slot] = v.length == 3 ? v : null;
            }
        }
        return out;
    }

    private static long[][] observedGrpc(io.etserve.grpc.protocol.ModelInferResponse r) {
        long[][] out = new long[2][];
        for (int i = 0; i < r.getOutputsCount(); i++) {
            int slot = slot(r.getOutputs(i).getName());
            if (slot >= 0 && i < r.getRawOutputContentsCount()) {
                ByteBuffer b = r.getRawOutputContents(i).asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
                out[slot] = b.remaining() == 24 ? new long[] {b.getLong(0), b.getLong(8), b.getLong(16)} : null;
            }
        }
        return out;
    }

    private static int slot(String output) {
        return switch (output) {
            case "observed_before" -> 0;
            case "observed_after" -> 1;
            default -> -1;
        };
    }

    /**
     * A call that fails in the middle of a real program: an input of +inf passes the first probe
     * and the CUDA partition (which turns it into NaN on the GPU), and the second probe refuses a
     * NaN as an invalid argument. The runner must still wait for the work already queued, answer
     * 400 with the runtime's reason, and leave the model serving: the calls after it are right.
     */
    static boolean reject(Map<String, String> a) throws Exception {
        int port = port(a, "port");
        String model = a.get("model");
        Reference reference = Reference.load(Path.of(a.get("reference")));
        InferPayloads payloads = new InferPayloads(reference, InferPayloads.Format.BINARY, model, port);
        Reference.TensorValue x = reference.cases().get(0).inputs().get(0);
        ByteBuffer infinite = ByteBuffer.allocate(x.data().size() * 4).order(ByteOrder.LITTLE_ENDIAN);
        while (infinite.hasRemaining()) {
            infinite.putFloat(Float.POSITIVE_INFINITY);
        }
        String header = "{\"inputs\":[{\"name\":\"" + x.name() + "\",\"datatype\":\"FP32\",\"shape\":"
                + java.util.Arrays.toString(x.shape()).replace(" ", "") + ",\"parameters\":{\"binary_data_size\":"
                + infinite.capacity() + "}}]}";
        byte[] json = header.getBytes(StandardCharsets.US_ASCII);
        byte[] head = LoopbackHttpConnection.ascii("POST /v2/models/" + model + "/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                + "Content-Type: application/octet-stream\r\nInference-Header-Content-Length: " + json.length
                + "\r\nContent-Length: " + (json.length + infinite.capacity()) + "\r\n\r\n");
        byte[] request = new byte[head.length + json.length + infinite.capacity()];
        System.arraycopy(head, 0, request, 0, head.length);
        System.arraycopy(json, 0, request, head.length, json.length);
        System.arraycopy(infinite.array(), 0, request, head.length + json.length, infinite.capacity());
        int status;
        String body;
        int rightAfter = 0;
        try (LoopbackHttpConnection c = new LoopbackHttpConnection(port, 30_000)) {
            LoopbackHttpConnection.Response r = c.exchange(request);
            status = r.status();
            body = new String(r.body(), StandardCharsets.UTF_8);
            for (int i = 0; i < payloads.cases(); i++) {
                rightAfter += payloads.check(i, c.exchange(payloads.request(i))) == null ? 1 : 0;
            }
        }
        int live = GpuServiceCheck.status(port, "/v2/health/live");
        boolean ok = status == 400 && body.contains("InvalidArgument") && rightAfter == payloads.cases() && live == 200;
        System.out.printf("| failing call mid-program | %d %s | right answers after it %d of %d | /v2/health/live %d | %s |%n",
                status, abbreviate(body), rightAfter, payloads.cases(), live, ok ? "ok" : "FAILED");
        return ok;
    }

    /**
     * Explicit repository control: {@code cycles} times load the model, make one checked call and
     * unload it, reading the device's used memory (nv_gpu_memory_used_bytes) and the service's
     * resident memory after each unload. Passes when device memory after the last cycle is within
     * 1 % of what it was after the first.
     */
    static boolean cycles(Map<String, String> a) throws Exception {
        int port = port(a, "port");
        int mgmt = port(a, "mgmt");
        String model = a.get("model");
        int cycles = Integer.parseInt(a.get("cycles"));
        long pid = Long.parseLong(a.get("pid"));
        InferPayloads payloads = new InferPayloads(Reference.load(Path.of(a.get("reference"))),
                InferPayloads.Format.BINARY, model, port);
        List<String> rows = new ArrayList<>();
        long before = deviceUsed(mgmt);
        long first = 0;
        long last = 0;
        int failures = 0;
        String firstFailure = null;
        for (int i = 1; i <= cycles; i++) {
            long t0 = System.nanoTime();
            String load = repository(port, model, "load");
            double loadMs = (System.nanoTime() - t0) / 1e6;
            long loaded = deviceUsed(mgmt);
            String error;
            try (LoopbackHttpConnection c = new LoopbackHttpConnection(port, 60_000)) {
                error = payloads.check(0, c.exchange(payloads.request(0)));
            }
            String unload = repository(port, model, "unload");
            Thread.sleep(200);
            long after = deviceUsed(mgmt);
            if (i == 1) {
                first = after;
            }
            last = after;
            boolean good = load == null && unload == null && error == null;
            if (!good) {
                failures++;
                firstFailure = firstFailure != null ? firstFailure : load != null ? load : unload != null ? unload : error;
            }
            rows.add(String.format("| %d | %.0f | %d | %d | %+d | %d | %s |", i, loadMs, mib(loaded), mib(after),
                    mib(after - first), rssMib(pid), good ? "ok" : "FAILED"));
        }
        double growth = first == 0 ? 0 : 100.0 * (last - first) / first;
        // expect=leak: the delegate is known to keep its memory (the service refuses such
        // reloads by default); the run measures how much, and passes when every cycle served.
        boolean flat = Math.abs(growth) <= 1.0;
        boolean ok = failures == 0 && ("leak".equals(a.get("expect")) ? !flat : flat);
        System.out.println("| cycle | load ms | device used loaded MiB | device used unloaded MiB | vs cycle 1 MiB | service RSS MiB | |");
        System.out.println("|---|---|---|---|---|---|---|");
        rows.forEach(System.out::println);
        System.out.printf("%n%s: device memory before the first load %d MiB; after cycle 1 %d MiB, after cycle %d %d MiB "
                + "(%+.1f %%, %+.1f MiB per cycle); %d failed cycles%s; %s%n", model, mib(before), mib(first), cycles,
                mib(last), growth, cycles > 1 ? (last - first) / (1024.0 * 1024) / (cycles - 1) : 0.0, failures,
                firstFailure == null ? "" : " (" + firstFailure + ")", ok ? "ok" : "FAILED");
        return ok;
    }

    /** Null when the repository call answered 200; otherwise its status and body. */
    private static String repository(int port, String model, String action) throws IOException {
        return repository(port, model, action, 160);
    }

    private static String repository(int port, String model, String action, int keep) throws IOException {
        byte[] request = LoopbackHttpConnection.ascii("POST /v2/repository/models/" + model + "/" + action
                + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 0\r\n\r\n");
        try (LoopbackHttpConnection c = new LoopbackHttpConnection(port, 300_000)) {
            LoopbackHttpConnection.Response r = c.exchange(request);
            String body = new String(r.body(), StandardCharsets.UTF_8);
            return r.status() == 200 ? null
                    : action + " " + r.status() + " " + (body.length() <= keep ? body : body.substring(0, keep) + "...");
        }
    }

    private static final Pattern DEVICE_USED = Pattern.compile("nv_gpu_memory_used_bytes\\{[^}]*\\} ([0-9.eE+]+)");

    /** Used memory of the first GPU, as the service's own gauge reports it (cudaMemGetInfo). */
    static long deviceUsed(int mgmt) throws IOException {
        Matcher m = DEVICE_USED.matcher(GpuServiceCheck.body(mgmt, "/actuator/prometheus"));
        return m.find() ? (long) Double.parseDouble(m.group(1)) : -1;
    }

    private static long rssMib(long pid) throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/" + pid + "/status"))) {
            if (line.startsWith("VmRSS:")) {
                return Long.parseLong(line.replaceAll("[^0-9]", "")) / 1024;
            }
        }
        return -1;
    }

    private static long mib(long bytes) {
        return bytes / (1024 * 1024);
    }

    private static String abbreviate(String s) {
        return s.length() <= 160 ? s : s.substring(0, 160) + "...";
    }
}
