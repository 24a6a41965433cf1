package io.etserve.bench;

import io.etserve.support.Reference;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import tools.jackson.databind.json.JsonMapper;
import tools.jackson.databind.node.ArrayNode;
import tools.jackson.databind.node.ObjectNode;

/**
 * The load generator's side of Triton's shared-memory extensions: POSIX shared-memory objects
 * (files under /dev/shm, as shm_open makes them) or, for CUDA shared memory, device memory
 * ({@link DeviceAllocations}), written and read by this process and registered with the service
 * as regions. Case {@code i}'s inputs lie one after another in region {@code bench-in-i}; worker
 * {@code w}'s outputs in {@code bench-out-w}, which only that worker's requests name, so
 * concurrent answers never share bytes.
 */
final class SharedMemoryObjects implements AutoCloseable {

    private static final Path SHM = Path.of("/dev/shm");
    private static final JsonMapper JSON = JsonMapper.builder().build();

    private final String prefix = "etserve-bench-" + ProcessHandle.current().pid();
    private final HttpClient http = HttpClient.newHttpClient();
    private final int port;
    private final List<Path> objects = new ArrayList<>();
    private final List<FileChannel> outputs = new ArrayList<>();
    private final int outputBytes;
    /** CUDA shared memory: the device memory, else null (system shared memory). */
    private final DeviceAllocations device;
    private final List<DeviceAllocations.Allocation> deviceOutputs = new ArrayList<>();

    SharedMemoryObjects(Reference reference, int port, int workers, boolean cuda) {
        this.port = port;
        this.device = cuda ? new DeviceAllocations() : null;
        Runtime.getRuntime().addShutdownHook(new Thread(this::deleteObjects, "shm-objects-cleanup"));
        try {
            unregisterAll();
            int most = 0;
            for (int i = 0; i < reference.cases().size(); i++) {
                Reference.Case c = reference.cases().get(i);
                ByteBuffer inputs = ByteBuffer.allocate((int) bytes(c.inputs()));
                c.inputs().forEach(t -> inputs.put(t.bytes()));
                region("bench-in-" + i, "in-" + i, inputs.array());
                most = Math.max(most, (int) bytes(c.outputs()));
            }
            outputBytes = most;
            for (int w = 0; w < workers; w++) {
                region("bench-out-" + w, "out-" + w, new byte[most]);
            }
        } catch (IOException e) {
            close();
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            close();
            throw new IllegalStateException(e);
        }
    }

    /** The JSON body of case {@code i} sent by worker {@code worker}: every tensor named in a region. */
    byte[] request(Reference.Case c, int i, int worker) {
        ObjectNode root = JSON.createObjectNode();
        ArrayNode inputs = root.putArray("inputs");
        long offset = 0;
        for (Reference.TensorValue t : c.inputs()) {
            ObjectNode node = inputs.addObject().put("name", t.name()).put("datatype", t.datatype());
            ArrayNode shape = node.putArray("shape");
            for (long d : t.shape()) {
                shape.add(d);
            }
            int size = t.bytes().remaining();
            node.putObject("parameters").put("shared_memory_region", "bench-in-" + i)
                    .put("shared_memory_byte_size", size).put("shared_memory_offset", offset);
            offset += size;
        }
        ArrayNode outputs = root.putArray("outputs");
        offset = 0;
        for (Reference.TensorValue t : c.outputs()) {
            int size = t.bytes().remaining();
            outputs.addObject().put("name", t.name()).putObject("parameters")
                    .put("shared_memory_region", "bench-out-" + worker).put("shared_memory_byte_size", size)
                    .put("shared_memory_offset", offset);
            offset += size;
        }
        return JSON.writeValueAsBytes(root);
    }

    /** Region {@code region} holding {@code bytes}, registered; an output region is kept to be read. */
    private void region(String region, String object, byte[] bytes) throws IOException, InterruptedException {
        boolean output = region.startsWith("bench-out-");
        if (device != null) {
            DeviceAllocations.Allocation a = device.allocate(bytes);
            post("/v2/cudasharedmemory/region/" + region + "/register", "{\"raw_handle\":{\"b64\":\""
                    + Base64.getEncoder().encodeToString(a.handle()) + "\"},\"device_id\":0,\"byte_size\":"
                    + bytes.length + "}");
            if (output) {
                deviceOutputs.add(a);
            }
            return;
        }
        Path file = create(object, bytes);
        register(region, file, bytes.length);
        if (output) {
            outputs.add(FileChannel.open(file, StandardOpenOption.READ));
        }
    }

    /** What the service last wrote into worker {@code worker}'s region. */
    byte[] outputs(int worker) {
        if (device != null) {
            return device.read(deviceOutputs.get(worker));
        }
        ByteBuffer into = ByteBuffer.allocate(outputBytes);
        try {
            while (into.hasRemaining() && outputs.get(worker).read(into, into.position()) >= 0) {
                // positional reads until full
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return into.array();
    }

    @Override
    public void close() {
        try {
            unregisterAll();
        } catch (IOException | InterruptedException | RuntimeException e) {
            // the service may be gone already; the objects go anyway
        }
        for (FileChannel c : outputs) {
            try {
                c.close();
            } catch (IOException e) {
                // read-only
            }
        }
        deleteObjects();
        if (device != null) {
            device.close();
        }
    }

    private synchronized void deleteObjects() {
        for (Path p : objects) {
            try {
                Files.deleteIfExists(p);
            } catch (IOException e) {
                // left for the next run's prefix to differ
            }
        }
    }

    private static long bytes(List<Reference.TensorValue> tensors) {
        long n = 0;
        for (Reference.TensorValue t : tensors) {
            n += t.bytes().remaining();
        }
        return n;
    }

    private synchronized Path create(String name, byte[] bytes) throws IOException {
        Path p = SHM.resolve(prefix + "-" + name);
        objects.add(p);
        return Files.write(p, bytes);
    }

    private void register(String region, Path object, long byteSize) throws IOException, InterruptedException {
        post("/v2/systemsharedmemory/region/" + region + "/register", "{\"key\":\"/" + object.getFileName()
                + "\",\"offset\":0,\"byte_size\":" + byteSize + "}");
    }

    private void unregisterAll() throws IOException, InterruptedException {
        post(device != null ? "/v2/cudasharedmemory/unregister" : "/v2/systemsharedmemory/unregister", "");
    }

    private void post(String path, String body) throws IOException, InterruptedException {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
                HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() != 200) {
            throw new IllegalStateException(path + ": HTTP " + r.statusCode() + " " + r.body()
                    + " (the service needs --etserve.shared-memory.enabled=true)");
        }
    }
}
