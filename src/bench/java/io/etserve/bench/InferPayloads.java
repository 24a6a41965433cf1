package io.etserve.bench;

import io.etserve.support.Reference;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;
import tools.jackson.databind.node.ArrayNode;
import tools.jackson.databind.node.ObjectNode;

/**
 * The {@code /infer} requests the load generator sends, pre-encoded from a model's
 * reference.json, and the check of every response against the reference outputs (values
 * PyTorch computed at export time, not anything the service produced).
 *
 * <p>{@link Format#SHM}: Triton's system shared-memory extension, as a client on the server's
 * host uses it. Each case's inputs are written once into a POSIX shared-memory object of their
 * own (under /dev/shm), each worker's outputs go to an object of the worker's own, both
 * registered as regions; the request is a small JSON body naming them, the answer a small JSON
 * body, and the outputs are checked where the service wrote them. The service must allow
 * registration ({@code --etserve.shared-memory.enabled=true}). {@link Format#CUDA_SHM}: the same
 * with Triton's CUDA shared memory, the tensors in device memory this process allocates (a GPU
 * host, the service on the same device).
 */
final class InferPayloads implements AutoCloseable {

    enum Format { JSON, BINARY, GRPC, SHM, CUDA_SHM }

    private static final JsonMapper JSON = JsonMapper.builder().build();

    private final Reference reference;
    private final Format format;
    private final List<byte[]> requests = new ArrayList<>();
    private final List<io.etserve.grpc.protocol.ModelInferRequest> grpcRequests = new ArrayList<>();
    private final List<Integer> bodyLengths = new ArrayList<>();
    private final List<Long> tensorBytes = new ArrayList<>();
    /** SHM: requests by case, then by worker (each names its worker's output region). */
    private final List<List<byte[]>> shmRequests = new ArrayList<>();
    private final SharedMemoryObjects shm;

    InferPayloads(Reference reference, Format format, String model, int port) {
        this(reference, format, model, port, 1);
    }

    /** @param workers how many workers send requests (SHM gives each its own output region) */
    InferPayloads(Reference reference, Format format, String model, int port, int workers) {
        if (reference.cases().isEmpty()) {
            throw new IllegalArgumentException("the reference has no cases");
        }
        this.reference = reference;
        this.format = format;
        this.shm = format == Format.SHM || format == Format.CUDA_SHM
                ? new SharedMemoryObjects(reference, port, workers, format == Format.CUDA_SHM) : null;
        for (int i = 0; i < reference.cases().size(); i++) {
            Reference.Case c = reference.cases().get(i);
            if (shm != null) {
                List<byte[]> perWorker = new ArrayList<>();
                for (int w = 0; w < workers; w++) {
                    perWorker.add(http(shm.request(c, i, w), model, port, false, 0));
                }
                shmRequests.add(perWorker);
                bodyLengths.add(perWorker.get(0).length - headEnd(perWorker.get(0)));
            } else if (format == Format.GRPC) {
                io.etserve.grpc.protocol.ModelInferRequest request = grpcRequest(c, model);
                grpcRequests.add(request);
                bodyLengths.add(request.getSerializedSize());
            } else {
                byte[] request = encode(c, format, model, port);
                requests.add(request);
                bodyLengths.add(request.length - headEnd(request));
            }
            tensorBytes.add(bytes(c.inputs()) + bytes(c.outputs()));
        }
    }

    /** Bytes of the request body of case {@code i} (JSON header and binary sections). */
    int bodyLength(int i) {
        return bodyLengths.get(i);
    }

    /** Tensor bytes case {@code i} moves: its inputs' and its outputs' raw data. */
    long tensorBytes(int i) {
        return tensorBytes.get(i);
    }

    /** Raw input bytes of case {@code i} (what an echo of its binary request carries each way). */
    long inputBytes(int i) {
        return bytes(reference.cases().get(i).inputs());
    }

    private static long bytes(List<Reference.TensorValue> tensors) {
        long n = 0;
        for (Reference.TensorValue t : tensors) {
            n += t.bytes().remaining();
        }
        return n;
    }

    private static int headEnd(byte[] request) {
        for (int i = 3; i < request.length; i++) {
            if (request[i - 3] == '\r' && request[i - 2] == '\n' && request[i - 1] == '\r' && request[i] == '\n') {
                return i + 1;
            }
        }
        throw new IllegalStateException("no end of headers");
    }

    /** Only status and size: the echo baseline returns the request body as it came. */
    String checkEcho(int i, LoopbackHttpConnection.Response response) {
        if (response.status() != 200) {
            return "HTTP " + response.status();
        }
        return response.body().length == bodyLength(i) ? null
                : "echo of " + response.body().length + " bytes for a body of " + bodyLength(i);
    }

    int cases() {
        return reference.cases().size();
    }

    /** The gRPC ModelInfer request for reference case {@code i}: raw inputs, as Triton's clients send. */
    io.etserve.grpc.protocol.ModelInferRequest grpcRequest(int i) {
        return grpcRequests.get(i);
    }

    private static io.etserve.grpc.protocol.ModelInferRequest grpcRequest(Reference.Case c, String model) {
        var b = io.etserve.grpc.protocol.ModelInferRequest.newBuilder().setModelName(model);
        for (Reference.TensorValue t : c.inputs()) {
            var in = b.addInputsBuilder().setName(t.name()).setDatatype(t.datatype());
            for (long d : t.shape()) {
                in.addShape(d);
            }
            b.addRawInputContents(com.google.protobuf.ByteString.copyFrom(t.bytes()));
        }
        return b.build();
    }

    /** Null when the gRPC response matches case {@code i}; otherwise why it does not. */
    String checkGrpc(int i, io.etserve.grpc.protocol.ModelInferResponse response) {
        Reference.Case expected = reference.cases().get(i);
        if (response.getOutputsCount() != expected.outputs().size()
                || response.getRawOutputContentsCount() != expected.outputs().size()) {
            return "expected " + expected.outputs().size() + " raw outputs, got " + response.getOutputsCount();
        }
        for (int o = 0; o < expected.outputs().size(); o++) {
            Reference.TensorValue want = expected.outputs().get(o);
            var out = response.getOutputs(o);
            if (!want.name().equals(out.getName()) || !want.datatype().equals(out.getDatatype())) {
                return "output " + o + " is " + out.getName() + " " + out.getDatatype();
            }
            byte[] raw = response.getRawOutputContents(o).toByteArray();
            List<Double> got = decode(want.datatype(), raw, 0, raw.length);
            if (got == null || got.size() != want.data().size()) {
                return "output " + want.name() + " does not decode to " + want.data().size() + " values";
            }
            for (int k = 0; want.compared() && k < got.size(); k++) {
                if (!reference.close(got.get(k), want.data().get(k))) {
                    return "output " + want.name() + "[" + k + "] = " + got.get(k) + ", reference " + want.data().get(k);
                }
            }
        }
        return null;
    }

    /** The full HTTP request for reference case {@code i}. */
    byte[] request(int i) {
        return request(i, 0);
    }

    /** Null when the response matches case {@code i}; otherwise why it does not. */
    String check(int i, LoopbackHttpConnection.Response response) {
        return check(i, 0, response);
    }

    /** The full HTTP request for reference case {@code i}, sent by worker {@code worker}. */
    byte[] request(int i, int worker) {
        return shm != null ? shmRequests.get(i).get(worker) : requests.get(i);
    }

    /** Unregisters and deletes the shared-memory objects (SHM, CUDA_SHM); nothing otherwise. */
    @Override
    public void close() {
        if (shm != null) {
            shm.close();
        }
    }

    /** Null when the response to worker {@code worker} matches case {@code i}; otherwise why it does not. */
    String check(int i, int worker, LoopbackHttpConnection.Response response) {
        if (response.status() != 200) {
            return "HTTP " + response.status() + ": " + abbreviate(new String(response.body(), StandardCharsets.UTF_8));
        }
        if (shm != null) {
            return checkShared(i, worker, response);
        }
        Reference.Case expected = reference.cases().get(i);
        byte[] body = response.body();
        int jsonLength = body.length;
        if (format == Format.BINARY) {
            if (response.inferenceHeaderLength().isEmpty()) {
                return "binary response without Inference-Header-Content-Length";
            }
            jsonLength = response.inferenceHeaderLength().getAsInt();
            if (jsonLength > body.length) {
                return "Inference-Header-Content-Length " + jsonLength + " exceeds the body of " + body.length;
            }
        }
        JsonNode root;
        try {
            root = JSON.readTree(body, 0, jsonLength);
        } catch (RuntimeException e) {
            return "unparseable response JSON: " + e.getMessage();
        }
        JsonNode outputs = root.path("outputs");
        if (outputs.size() != expected.outputs().size()) {
            return "expected " + expected.outputs().size() + " outputs, got " + outputs.size();
        }
        Map<String, Reference.TensorValue> byName = new HashMap<>();
        expected.outputs().forEach(t -> byName.put(t.name(), t));
        int binaryOffset = jsonLength;
        for (JsonNode out : outputs) {
            Reference.TensorValue want = byName.get(out.path("name").asString());
            if (want == null) {
                return "unexpected output " + out.path("name");
            }
            if (!want.datatype().equals(out.path("datatype").asString())) {
                return "output " + want.name() + " has datatype " + out.path("datatype") + ", expected " + want.datatype();
            }
            if (!shapeMatches(out.path("shape"), want.shape())) {
                return "output " + want.name() + " has shape " + out.path("shape");
            }
            List<Double> got;
            if (format == Format.BINARY) {
                int size = out.path("parameters").path("binary_data_size").asInt(-1);
                if (size < 0 || binaryOffset + size > body.length) {
                    return "output " + want.name() + " has no usable binary_data_size";
                }
                got = decode(want.datatype(), body, binaryOffset, size);
                if (got == null) {
                    return "cannot decode binary " + want.datatype();
                }
                binaryOffset += size;
            } else {
                got = new ArrayList<>();
                for (JsonNode v : out.path("data")) {
                    got.add(v.asDouble());
                }
            }
            if (got.size() != want.data().size()) {
                return "output " + want.name() + " has " + got.size() + " values, expected " + want.data().size();
            }
            for (int k = 0; want.compared() && k < got.size(); k++) {
                if (!reference.close(got.get(k), want.data().get(k))) {
                    return "output " + want.name() + "[" + k + "] = " + got.get(k) + ", reference " + want.data().get(k);
                }
            }
        }
        if (binaryOffset != body.length && format == Format.BINARY) {
            return (body.length - binaryOffset) + " unexplained bytes after the binary outputs";
        }
        return null;
    }

    /** An answer whose outputs are in the worker's region: names, types and shapes only, the values there. */
    private String checkShared(int i, int worker, LoopbackHttpConnection.Response response) {
        Reference.Case expected = reference.cases().get(i);
        JsonNode outputs = JSON.readTree(response.body()).path("outputs");
        if (outputs.size() != expected.outputs().size()) {
            return "expected " + expected.outputs().size() + " outputs, got " + outputs.size();
        }
        byte[] written = shm.outputs(worker);
        int offset = 0;
        for (int o = 0; o < outputs.size(); o++) {
            Reference.TensorValue want = expected.outputs().get(o);
            JsonNode out = outputs.get(o);
            if (!want.name().equals(out.path("name").asString()) || !shapeMatches(out.path("shape"), want.shape())
                    || out.has("data") || out.has("parameters")) {
                return "output " + o + " is " + out;
            }
            int size = want.bytes().remaining();
            List<Double> got = decode(want.datatype(), written, offset, size);
            offset += size;
            for (int k = 0; want.compared() && got != null && k < got.size(); k++) {
                if (!reference.close(got.get(k), want.data().get(k))) {
                    return "output " + want.name() + "[" + k + "] = " + got.get(k) + ", reference " + want.data().get(k);
                }
            }
        }
        return null;
    }

    private static byte[] encode(Reference.Case c, Format format, String model, int port) {
        ObjectNode root = JSON.createObjectNode();
        ArrayNode inputs = root.putArray("inputs");
        ByteArrayOutputStream binary = new ByteArrayOutputStream();
        for (Reference.TensorValue in : c.inputs()) {
            ObjectNode node = inputs.addObject();
            node.put("name", in.name());
            node.put("datatype", in.datatype());
            ArrayNode shape = node.putArray("shape");
            for (long d : in.shape()) {
                shape.add(d);
            }
            if (format == Format.BINARY) {
                ByteBuffer bytes = in.bytes();
                node.putObject("parameters").put("binary_data_size", bytes.remaining());
                byte[] raw = new byte[bytes.remaining()];
                bytes.get(raw);
                binary.writeBytes(raw);
            } else {
                node.set("data", in.json().path("data"));
            }
        }
        ArrayNode outputs = root.putArray("outputs");
        for (Reference.TensorValue out : c.outputs()) {
            ObjectNode node = outputs.addObject();
            node.put("name", out.name());
            if (format == Format.BINARY) {
                node.putObject("parameters").put("binary_data", true);
            }
        }
        return http(JSON.writeValueAsBytes(root), model, port, format == Format.BINARY, binary.size(), binary);
    }

    private static byte[] http(byte[] json, String model, int port, boolean binaryFormat, int binaryBytes) {
        return http(json, model, port, binaryFormat, binaryBytes, new ByteArrayOutputStream());
    }

    /** The whole HTTP request: head, JSON, the binary sections. */
    private static byte[] http(byte[] json, String model, int port, boolean binaryFormat, int binaryBytes,
            ByteArrayOutputStream binary) {
        StringBuilder head = new StringBuilder()
                .append("POST /v2/models/").append(model).append("/infer HTTP/1.1\r\n")
                .append("Host: 127.0.0.1:").append(port).append("\r\n");
        if (binaryFormat) {
            head.append("Content-Type: application/octet-stream\r\n")
                    .append("Inference-Header-Content-Length: ").append(json.length).append("\r\n");
        } else {
            head.append("Content-Type: application/json\r\n");
        }
        head.append("Content-Length: ").append(json.length + binaryBytes).append("\r\n\r\n");
        ByteArrayOutputStream request = new ByteArrayOutputStream();
        request.writeBytes(LoopbackHttpConnection.ascii(head.toString()));
        request.writeBytes(json);
        request.writeBytes(binary.toByteArray());
        return request.toByteArray();
    }

    private static boolean shapeMatches(JsonNode shape, long[] expected) {
        if (shape.size() != expected.length) {
            return false;
        }
        for (int i = 0; i < expected.length; i++) {
            if (shape.get(i).asLong() != expected[i]) {
                return false;
            }
        }
        return true;
    }

    /** Little-endian values of the types the demo models produce; null for any other type. */
    private static List<Double> decode(String datatype, byte[] body, int offset, int size) {
        ByteBuffer b = ByteBuffer.wrap(body, offset, size).order(ByteOrder.LITTLE_ENDIAN);
        List<Double> values = new ArrayList<>();
        switch (datatype) {
            case "FP32" -> { while (b.remaining() >= 4) values.add((double) b.getFloat()); }
            case "FP64" -> { while (b.remaining() >= 8) values.add(b.getDouble()); }
            case "INT32" -> { while (b.remaining() >= 4) values.add((double) b.getInt()); }
            case "INT64" -> { while (b.remaining() >= 8) values.add((double) b.getLong()); }
            default -> { return null; }
        }
        return b.hasRemaining() ? null : values;
    }

    private static String abbreviate(String s) {
        return s.length() <= 200 ? s : s.substring(0, 200) + "...";
    }
}
