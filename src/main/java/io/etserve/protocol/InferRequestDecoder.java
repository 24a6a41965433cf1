package io.etserve.protocol;

import io.etserve.inference.DataType;
import io.etserve.inference.InferenceRequest.RequestedOutput;
import io.etserve.inference.InferenceRequest;
import io.etserve.inference.SharedMemoryReference;
import io.etserve.inference.Tensor;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.IntFunction;
import tools.jackson.core.JacksonException;
import tools.jackson.core.JsonParser;
import tools.jackson.core.JsonToken;
import tools.jackson.core.ObjectReadContext;

/**
 * Decodes a KServe v2 {@code /infer} request body into an {@link InferenceRequest}.
 *
 * <p>The body is JSON, or, with the binary tensor data extension, a JSON header of
 * {@code Inference-Header-Content-Length} bytes followed by the raw little-endian data of every
 * input that declares {@code parameters.binary_data_size}, in input order. JSON {@code data} may
 * be flat or nested row-major arrays; only the element count is checked against the shape.
 *
 * <p>This class reads the envelope (the request object, its inputs' names, datatypes, shapes and
 * parameters, the outputs asked for); {@link JsonTensorData} parses JSON {@code data} straight
 * into a direct buffer, and {@link BinaryTensorData} hands out binary sections as views of the
 * body's buffer, so the native bridge reads every input in place. An input that names a system
 * shared-memory region is read from there ({@link SharedMemoryInputs}), and a requested output
 * that names one carries it in its {@link RequestedOutput}.
 *
 * <p>Every problem with the body, however malformed, surfaces as an
 * {@link InvalidRequestException}; sizes are checked against {@link DecodeLimits} and against the
 * body itself before any tensor memory is allocated. The checks gRPC makes too are
 * {@link TensorChecks}'; whether the inputs fit a model is not this class's question. Warm-up
 * files are decoded here as well. Thread-safe.
 */
public final class InferRequestDecoder {

    /** Deepest nesting of a {@code data} array (row-major nesting has one level per dimension). */
    static final int MAX_DATA_NESTING = TensorChecks.MAX_RANK;
    private static final NumberedLabels INPUT_LABELS = new NumberedLabels("Input #");
    private static final NumberedLabels REQUESTED_OUTPUT_LABELS = new NumberedLabels("Requested output #");

    private final SharedMemoryInputs sharedMemory;

    /** A decoder for requests that cannot name shared-memory regions (a model's warm-up files, tools). */
    public InferRequestDecoder() {
        this(SharedMemoryInputs.NONE);
    }

    /** @param sharedMemory where inputs that name a system shared-memory region are read */
    public InferRequestDecoder(SharedMemoryInputs sharedMemory) {
        this.sharedMemory = Objects.requireNonNull(sharedMemory, "sharedMemory");
    }

    /**
     * A whole body in one array (a model's warm-up file, tests and tools): the binary sections are copied once into a
     * fresh direct buffer, so the inputs do not depend on {@code body} afterwards.
     */
    public InferenceRequest decode(byte[] body, Integer inferenceHeaderContentLength, DecodeLimits limits) {
        Objects.requireNonNull(body, "body");
        int headerLength = headerLength(body.length, inferenceHeaderContentLength);
        ByteBuffer binary = ByteBuffer.allocateDirect(body.length - headerLength)
                .put(body, headerLength, body.length - headerLength).flip();
        return decode(body, headerLength, inferenceHeaderContentLength, binary, limits, ByteBuffer::allocateDirect);
    }

    /**
     * A body as the server receives it: the JSON part in {@code json[0, jsonLength)}, the binary
     * sections (if any) in {@code binary}, already in direct memory. Binary inputs become slices
     * of {@code binary} (no copy); JSON data is parsed into buffers from {@code tensorBuffers}.
     * Both must stay valid until the request is done with.
     */
    public InferenceRequest decode(byte[] json, int jsonLength, Integer inferenceHeaderContentLength, ByteBuffer binary,
            DecodeLimits limits, IntFunction<ByteBuffer> tensorBuffers) {
        return decode(json, jsonLength, inferenceHeaderContentLength, binary, limits, tensorBuffers, tensorBuffers);
    }

    /**
     * As {@link #decode(byte[], int, Integer, ByteBuffer, DecodeLimits, IntFunction)}, inputs read
     * from shared memory into buffers from {@code sharedMemoryBuffers}: the transport counts them
     * in its in-flight budget, as the bytes of a body (a JSON tensor is bounded by its text).
     */
    public InferenceRequest decode(byte[] json, int jsonLength, Integer inferenceHeaderContentLength, ByteBuffer binary,
            DecodeLimits limits, IntFunction<ByteBuffer> tensorBuffers, IntFunction<ByteBuffer> sharedMemoryBuffers) {
        Objects.requireNonNull(json, "json");
        Objects.requireNonNull(limits, "limits");
        long total = (long) jsonLength + binary.remaining();
        int headerLength = headerLength(total, inferenceHeaderContentLength);
        if (headerLength != jsonLength) {
            throw new IllegalArgumentException("the JSON part is " + jsonLength + " bytes, its header says " + headerLength);
        }
        requireUtf8(json, headerLength);
        return new Decoding(json, headerLength, binary, inferenceHeaderContentLength != null, limits, tensorBuffers,
                sharedMemory, sharedMemoryBuffers).run();
    }

    private static int headerLength(long bodyLength, Integer declared) {
        if (declared == null) {
            return (int) bodyLength;
        }
        if (declared < 0) {
            throw new InvalidRequestException("Inference-Header-Content-Length is negative (" + declared + ").");
        }
        if (declared > bodyLength) {
            throw new InvalidRequestException("Inference-Header-Content-Length (" + declared
                    + ") is larger than the request body (" + bodyLength + " bytes).");
        }
        return declared;
    }

    /**
     * JSON starts with an ASCII character, so a UTF-16 byte order mark or a zero among its first
     * bytes means UTF-16 or UTF-32. Refusing those keeps Jackson on its UTF-8 parser, whose token
     * offsets are byte offsets.
     */
    private static void requireUtf8(byte[] body, int headerLength) {
        boolean utf16Mark = headerLength >= 2
                && ((body[0] == (byte) 0xFE && body[1] == (byte) 0xFF) || (body[0] == (byte) 0xFF && body[1] == (byte) 0xFE));
        boolean zero = false;
        for (int i = 0; i < Math.min(4, headerLength); i++) {
            zero |= body[i] == 0;
        }
        if (utf16Mark || zero) {
            throw new InvalidRequestException("The request's JSON must be encoded as UTF-8.");
        }
    }

    /** A list's first capacity for a request's inputs or outputs: most have one or two (ArrayList starts at 10). */
    private static final int FEW_TENSORS = 4;

    /** The state of one decode call. */
    private static final class Decoding {
        private final byte[] body;  // the JSON part, from 0 to headerLength
        private final int headerLength;
        private final BinaryTensorData binary;  // null without the binary extension
        private final DecodeLimits limits;
        private final IntFunction<ByteBuffer> tensorBuffers;
        private final SharedMemoryInputs sharedMemory;
        private final IntFunction<ByteBuffer> sharedMemoryBuffers;
        /** Bytes the inputs decoded so far read from shared memory. */
        private long sharedMemoryBytes;
        /** What is being read, for the message when Jackson rejects the JSON. */
        private String context = "The request";
        /** One input's or requested output's parameters at a time. */
        private final TensorParameters tensorParameters = new TensorParameters();

        Decoding(byte[] body, int headerLength, ByteBuffer binary, boolean hasBinarySection, DecodeLimits limits,
                IntFunction<ByteBuffer> tensorBuffers, SharedMemoryInputs sharedMemory,
                IntFunction<ByteBuffer> sharedMemoryBuffers) {
            this.body = body;
            this.headerLength = headerLength;
            this.binary = hasBinarySection ? new BinaryTensorData(binary) : null;
            this.limits = limits;
            this.tensorBuffers = tensorBuffers;
            this.sharedMemory = sharedMemory;
            this.sharedMemoryBuffers = sharedMemoryBuffers;
        }

        InferenceRequest run() {
            try (JsonParser p = ProtocolJson.FACTORY.createParser(ObjectReadContext.empty(), body, 0, headerLength)) {
                return readRequest(p);
            } catch (JacksonException e) {
                throw new InvalidRequestException(context + " is not valid JSON: " + reason(e), e);
            }
        }

        /** Jackson's reason, without its advice to enable parser features (which clients cannot do). */
        private static String reason(JacksonException e) {
            String m = e.getOriginalMessage();
            if (m != null && m.startsWith("Non-standard token")) {
                int advice = m.indexOf(": enable");
                return (advice > 0 ? m.substring(0, advice) : m)
                        + " (write NaN and infinities as the strings \"NaN\", \"Infinity\", \"-Infinity\")";
            }
            return m;
        }

        private InferenceRequest readRequest(JsonParser p) {
            if (p.nextToken() != JsonToken.START_OBJECT) {
                throw new InvalidRequestException("The request body must be a JSON object.");
            }
            String id = null;
            Map<String, Object> parameters = Map.of();
            List<Tensor> inputs = null;
            List<RequestedOutput> outputs = List.of();
            int seen = 0;
            for (String field = p.nextName(); field != null; field = p.nextName()) {
                p.nextToken();
                seen = once(seen, field, "The request");
                switch (field) {
                    case "id" -> id = readString(p, "The request", "id");
                    case "parameters" -> parameters = readParameters(p, "The request");
                    case "inputs" -> inputs = readInputs(p);
                    case "outputs" -> outputs = readOutputs(p);
                    default -> p.skipChildren();
                }
                context = "The request";
            }
            if (p.nextToken() != null) {
                throw new InvalidRequestException("The request's JSON has content after its closing brace.");
            }
            if (inputs == null) {
                throw new InvalidRequestException("The request has no 'inputs'.");
            }
            if (binary != null) {
                binary.requireAllRead();
            }
            Object binaryOutput = parameters.get("binary_data_output");
            if (binaryOutput != null && !(binaryOutput instanceof Boolean)) {
                throw new InvalidRequestException("The request parameter 'binary_data_output' must be a boolean.");
            }
            return new InferenceRequest(id, parameters, inputs, outputs, Boolean.TRUE.equals(binaryOutput));
        }

        private List<Tensor> readInputs(JsonParser p) {
            if (p.currentToken() != JsonToken.START_ARRAY) {
                throw new InvalidRequestException("The request's 'inputs' must be an array.");
            }
            List<Tensor> inputs = new ArrayList<>(FEW_TENSORS);
            for (JsonToken t = p.nextToken(); t != JsonToken.END_ARRAY; t = p.nextToken()) {
                int index = inputs.size();
                TensorChecks.requireInputSlot(index, limits);
                if (t != JsonToken.START_OBJECT) {
                    throw new InvalidRequestException("Input #" + index + " must be a JSON object.");
                }
                Tensor input = readInput(p, index);
                TensorChecks.requireFirstUse(inputs, input.name());
                inputs.add(input);
            }
            return inputs;
        }

        private Tensor readInput(JsonParser p, int index) {
            String label = INPUT_LABELS.of(index);
            context = label;
            String name = null;
            DataType type = null;
            long[] shape = null;
            TensorParameters parameters = tensorParameters.reset();
            boolean hasData = false;
            ByteBuffer data = null;
            int deferredDataOffset = -1;
            int seen = 0;
            for (String field = p.nextName(); field != null; field = p.nextName()) {
                p.nextToken();
                seen = once(seen, field, label);
                switch (field) {
                    case "name" -> {
                        name = readString(p, label, "name");
                        label = TensorChecks.label(name);
                        context = label;
                    }
                    case "datatype" -> type = readDataType(p, label);
                    case "shape" -> shape = readShape(p, label);
                    case "parameters" -> readTensorParameters(p, label, parameters);
                    case "data" -> {
                        hasData = true;
                        if (name != null && type != null && shape != null) {
                            data = readJsonData(p, label, type, shape);
                        } else {
                            // The protocol fixes no field order; read the data once the rest is known.
                            deferredDataOffset = byteOffset(p);
                            p.skipChildren();
                        }
                    }
                    default -> p.skipChildren();
                }
            }
            if (name == null) {
                throw new InvalidRequestException(label + " has no 'name'.");
            }
            if (type == null) {
                throw new InvalidRequestException(label + " has no 'datatype'.");
            }
            if (shape == null) {
                throw new InvalidRequestException(label + " has no 'shape'.");
            }
            Object binarySize = parameters.binaryDataSize;
            SharedMemoryReference inSharedMemory = parameters.sharedMemory(label);
            if (inSharedMemory != null) {
                if (hasData || binarySize != null) {
                    throw new InvalidRequestException(label + " has " + (hasData ? "'data'" : "binary_data_size")
                            + " and " + TensorChecks.SHARED_MEMORY_REGION + "; give one of them.");
                }
                data = sharedMemory.readInput(label, type, shape, TensorChecks.elementCount(label, shape, limits),
                        inSharedMemory, sharedMemoryBytes, sharedMemoryBuffers);
                sharedMemoryBytes += data.remaining();
            } else if (binarySize != null) {
                if (hasData) {
                    throw new InvalidRequestException(label + " has both 'data' and binary_data_size.");
                }
                data = readBinaryData(label, type, shape, binarySize);
            } else if (!hasData) {
                throw new InvalidRequestException(label + " has neither 'data' nor binary_data_size nor "
                        + TensorChecks.SHARED_MEMORY_REGION + ".");
            } else if (data == null) {
                data = readDeferredJsonData(deferredDataOffset, label, type, shape);
            }
            return new Tensor(name, type, shape, data);
        }

        private static int byteOffset(JsonParser p) {
            long offset = p.currentTokenLocation().getByteOffset();
            if (offset < 0) {
                throw new IllegalStateException("the UTF-8 parser reported no byte offset");
            }
            return (int) offset;
        }

        private ByteBuffer readDeferredJsonData(int offset, String label, DataType type, long[] shape) {
            try (JsonParser p = ProtocolJson.FACTORY.createParser(
                    ObjectReadContext.empty(), body, offset, headerLength - offset)) {
                p.nextToken();
                return readJsonData(p, label, type, shape);
            }
        }

        private static DataType readDataType(JsonParser p, String label) {
            return TensorChecks.dataType(label, readString(p, label, "datatype"));
        }

        private static long[] readShape(JsonParser p, String label) {
            if (p.currentToken() != JsonToken.START_ARRAY) {
                throw new InvalidRequestException(label + " 'shape' must be an array of non-negative integers.");
            }
            long[] dims = new long[4];
            int rank = 0;
            for (JsonToken t = p.nextToken(); t != JsonToken.END_ARRAY; t = p.nextToken()) {
                if (t != JsonToken.VALUE_NUMBER_INT) {
                    throw new InvalidRequestException(label + " 'shape' must be an array of non-negative integers.");
                }
                TensorChecks.requireRank(label, rank + 1);
                if (p.getNumberType() == JsonParser.NumberType.BIG_INTEGER) {
                    throw new InvalidRequestException(label + " has dimension " + p.getString() + ", which is too large.");
                }
                // A negative dimension is refused with the element count (TensorChecks), as over gRPC.
                long dim = p.getLongValue();
                if (rank == dims.length) {
                    dims = Arrays.copyOf(dims, rank * 2);
                }
                dims[rank++] = dim;
            }
            return Arrays.copyOf(dims, rank);
        }

        private ByteBuffer readBinaryData(String label, DataType type, long[] shape, Object declaredSize) {
            if (!(declaredSize instanceof Long size) || size < 0) {
                throw new InvalidRequestException(label + " binary_data_size must be a non-negative integer.");
            }
            if (binary == null) {
                throw new InvalidRequestException(label + " has binary_data_size but the request has no"
                        + " Inference-Header-Content-Length header.");
            }
            return binary.next(label, type, shape, TensorChecks.elementCount(label, shape, limits), size);
        }

        private ByteBuffer readJsonData(JsonParser p, String label, DataType type, long[] shape) {
            long count = TensorChecks.elementCount(label, shape, limits);
            // Every JSON element takes at least one byte, so a larger count cannot be honest; refusing
            // it here keeps a small body from allocating a large buffer.
            if (count > headerLength) {
                throw new InvalidRequestException(label + " has shape " + Arrays.toString(shape) + " of " + count
                        + " elements, more than its " + headerLength + "-byte JSON could hold.");
            }
            return JsonTensorData.read(p, label, type, shape, count, tensorBuffers);
        }

        private List<RequestedOutput> readOutputs(JsonParser p) {
            context = "The request's 'outputs'";
            if (p.currentToken() != JsonToken.START_ARRAY) {
                throw new InvalidRequestException("The request's 'outputs' must be an array.");
            }
            List<RequestedOutput> outputs = new ArrayList<>(FEW_TENSORS);
            Set<String> names = null;  // TensorChecks.requireRequestedOnce's, once many
            for (JsonToken t = p.nextToken(); t != JsonToken.END_ARRAY; t = p.nextToken()) {
                String label = REQUESTED_OUTPUT_LABELS.of(outputs.size());
                if (t != JsonToken.START_OBJECT) {
                    throw new InvalidRequestException(label + " must be a JSON object.");
                }
                String name = null;
                TensorParameters parameters = tensorParameters.reset();
                int seen = 0;
                for (String field = p.nextName(); field != null; field = p.nextName()) {
                    p.nextToken();
                    seen = once(seen, field, label);
                    switch (field) {
                        case "name" -> {
                            name = readString(p, label, "name");
                            label = TensorChecks.requestedOutputLabel(name);
                        }
                        case "parameters" -> readTensorParameters(p, label, parameters);
                        default -> p.skipChildren();
                    }
                }
                if (name == null) {
                    throw new InvalidRequestException(label + " has no 'name'.");
                }
                if (parameters.classification) {
                    throw TensorChecks.classificationRefused(label);
                }
                Object binary = parameters.binaryData;
                if (binary != null && !(binary instanceof Boolean)) {
                    throw new InvalidRequestException(label + " parameter 'binary_data' must be a boolean.");
                }
                SharedMemoryReference inSharedMemory = parameters.sharedMemory(label);
                if (inSharedMemory != null && Boolean.TRUE.equals(binary)) {
                    throw new InvalidRequestException(label + " asks for binary_data and " + TensorChecks.SHARED_MEMORY_REGION
                            + "; give one of them.");
                }
                names = TensorChecks.requireRequestedOnce(outputs, names, name, label);
                outputs.add(new RequestedOutput(name, (Boolean) binary, inSharedMemory));
            }
            return outputs;
        }

        /**
         * Protocol parameters are a flat object of strings, numbers and booleans. Integers become
         * {@link Long} (or {@link BigInteger} past its range), other numbers {@link Double}.
         */
        private static Map<String, Object> readParameters(JsonParser p, String owner) {
            requireParametersObject(p, owner);
            Map<String, Object> parameters = new LinkedHashMap<>();
            for (String key = p.nextName(); key != null; key = p.nextName()) {
                p.nextToken();
                if (parameters.put(key, parameterValue(p, owner, key)) != null) {
                    throw repeatedParameter(owner, key);
                }
            }
            return parameters;
        }

        /**
         * An input's or requested output's parameters into {@code into}: checked as
         * {@link #readParameters} checks them, but only the few this decoder acts on are kept (no
         * map per tensor); the rest are read and dropped.
         */
        private static void readTensorParameters(JsonParser p, String owner, TensorParameters into) {
            requireParametersObject(p, owner);
            for (String key = p.nextName(); key != null; key = p.nextName()) {
                p.nextToken();
                Object value = parameterValue(p, owner, key);
                if (!into.firstTime(key)) {
                    throw repeatedParameter(owner, key);
                }
                switch (key) {
                    case "binary_data_size" -> into.binaryDataSize = value;
                    case "binary_data" -> into.binaryData = value;
                    case TensorChecks.SHARED_MEMORY_REGION -> into.sharedMemoryRegion = value;
                    case TensorChecks.SHARED_MEMORY_BYTE_SIZE -> into.sharedMemoryByteSize = value;
                    case TensorChecks.SHARED_MEMORY_OFFSET -> into.sharedMemoryOffset = value;
                    case "classification" -> into.classification = true;
                    default -> { }
                }
            }
        }

        private static void requireParametersObject(JsonParser p, String owner) {
            if (p.currentToken() != JsonToken.START_OBJECT) {
                throw new InvalidRequestException(owner + " 'parameters' must be a JSON object.");
            }
        }

        /** The value at the parser, refused unless a string, number or boolean. */
        private static Object parameterValue(JsonParser p, String owner, String key) {
            return switch (p.currentToken()) {
                case VALUE_STRING -> p.getString();
                case VALUE_TRUE -> Boolean.TRUE;
                case VALUE_FALSE -> Boolean.FALSE;
                case VALUE_NUMBER_INT -> p.getNumberType() == JsonParser.NumberType.BIG_INTEGER
                        ? p.getBigIntegerValue()
                        : (Object) p.getLongValue();
                case VALUE_NUMBER_FLOAT -> p.getDoubleValue();
                default -> throw new InvalidRequestException(owner + " parameter " + TensorChecks.quote(key)
                        + " must be a string, number or boolean.");
            };
        }

        private static InvalidRequestException repeatedParameter(String owner, String key) {
            return new InvalidRequestException(owner + " parameter " + TensorChecks.quote(key) + " appears more than once.");
        }

        /**
         * Records {@code field} among the fields of one JSON object already read ({@code seen}, a
         * bit each), refusing a second one of those this decoder reads: "the last one wins" would
         * let two {@code shape}s disagree silently. Others are skipped unread, so their repeats do
         * no harm. Checked here rather than by Jackson's duplicate detection, which builds a set
         * of names per object.
         *
         * @param owner how messages name the object ({@code Input 'x'})
         */
        private static int once(int seen, String field, String owner) {
            int bit = switch (field) {
                case "id" -> 1;
                case "name" -> 1 << 1;
                case "datatype" -> 1 << 2;
                case "shape" -> 1 << 3;
                case "parameters" -> 1 << 4;
                case "data" -> 1 << 5;
                case "inputs" -> 1 << 6;
                case "outputs" -> 1 << 7;
                default -> 0;
            };
            if ((seen & bit) != 0) {
                throw new InvalidRequestException(owner + " has " + TensorChecks.quote(field) + " more than once.");
            }
            return seen | bit;
        }

        private static String readString(JsonParser p, String owner, String field) {
            if (p.currentToken() != JsonToken.VALUE_STRING) {
                throw new InvalidRequestException(owner + " '" + field + "' must be a string.");
            }
            return p.getString();
        }
    }

    /**
     * What the decoder acts on among an input's or requested output's parameters, read into one
     * object per decode call (reset per tensor) rather than a map per tensor. Repeated keys are
     * found by a scan while few, by a set once many, which nothing else bounds.
     */
    private static final class TensorParameters {
        private static final int FEW_KEYS = 8;

        Object binaryDataSize;
        Object binaryData;
        Object sharedMemoryRegion;
        Object sharedMemoryByteSize;
        Object sharedMemoryOffset;
        boolean classification;
        private final String[] keys = new String[FEW_KEYS];
        private int keyCount;
        private Set<String> manyKeys;

        TensorParameters reset() {
            binaryDataSize = null;
            binaryData = null;
            sharedMemoryRegion = null;
            sharedMemoryByteSize = null;
            sharedMemoryOffset = null;
            classification = false;
            Arrays.fill(keys, 0, keyCount, null);
            keyCount = 0;
            manyKeys = null;
            return this;
        }

        /** Where in shared memory the tensor is, or null when its parameters name no region. */
        SharedMemoryReference sharedMemory(String label) {
            return TensorChecks.sharedMemoryReference(label, sharedMemoryRegion, sharedMemoryByteSize, sharedMemoryOffset);
        }

        /** Records {@code key}; false when this tensor's parameters had it already. */
        boolean firstTime(String key) {
            if (manyKeys != null) {
                return manyKeys.add(key);
            }
            for (int i = 0; i < keyCount; i++) {
                if (keys[i].equals(key)) {
                    return false;
                }
            }
            if (keyCount < FEW_KEYS) {
                keys[keyCount++] = key;
            } else {
                manyKeys = new HashSet<>(Arrays.asList(keys));
                manyKeys.add(key);
            }
            return true;
        }
    }

    /**
     * How messages name a tensor until its name is read ({@code Input #0}); read only by messages,
     * so the usual indexes are built once rather than per request.
     */
    private static final class NumberedLabels {
        private final String prefix;
        private final String[] first = new String[16];

        NumberedLabels(String prefix) {
            this.prefix = prefix;
            for (int i = 0; i < first.length; i++) {
                first[i] = prefix + i;
            }
        }

        String of(int index) {
            return index < first.length ? first[index] : prefix + index;
        }
    }
}
