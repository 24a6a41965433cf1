package io.etserve.grpc;

import com.google.protobuf.ByteString;
import com.google.protobuf.UnsafeByteOperations;
import io.etserve.grpc.protocol.InferParameter;
import io.etserve.grpc.protocol.InferTensorContents;
import io.etserve.grpc.protocol.ModelInferRequest;
import io.etserve.grpc.protocol.ModelInferResponse;
import io.etserve.inference.DataType;
import io.etserve.inference.InferenceRequest;
import io.etserve.inference.InferenceResponse;
import io.etserve.inference.SharedMemoryReference;
import io.etserve.inference.Tensor;
import io.etserve.protocol.DecodeLimits;
import io.etserve.protocol.InvalidRequestException;
import io.etserve.protocol.SharedMemoryInputs;
import io.etserve.protocol.TensorChecks;
import io.etserve.runtime.BufferLease;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.IntFunction;
import java.util.function.IntToLongFunction;

/**
 * ModelInfer messages to and from the inference layer's request and response: the gRPC twin of
 * the REST decoder and encoder. It translates (names, datatypes, shapes, bytes) and makes the
 * decoders' shared checks ({@link TensorChecks}: well-formed, within the size limits, before
 * allocating); whether the tensors fit the model's method is {@code TensorContract}'s question,
 * as for REST. Typed contents fields are chosen from the datatype's kind and width.
 *
 * <p>Copies: in, each raw section or typed list into one pooled direct buffer of the call's
 * {@link BufferLease} (the bridge reads it in place); a large request's raw sections are still
 * Netty's buffers then ({@link InPlaceRequests}), so that is their one copy. Out, none here: each
 * output's buffer (the lease's too) is wrapped as the response's raw section and serialized from
 * there, before the lease gives the buffers back.
 */
final class GrpcTensors {

    private static final String CLASSIFICATION = "classification";

    private final DecodeLimits limits;
    private final SharedMemoryInputs sharedMemory;

    /** @param sharedMemory where inputs that name a system shared-memory region are read */
    GrpcTensors(DecodeLimits limits, SharedMemoryInputs sharedMemory) {
        this.limits = limits;
        this.sharedMemory = sharedMemory;
    }

    /**
     * The request's tensors, their data in buffers of {@code buffers}. As Triton's, the
     * {@code raw_input_contents} belong in order to the inputs not in shared memory.
     */
    InferenceRequest decode(ModelInferRequest request, BufferLease buffers) {
        return decode(request, buffers, buffers::acquire);
    }

    /** As {@link #decode(ModelInferRequest, BufferLease)}, inputs in shared memory read into {@code sharedMemoryBuffers}. */
    InferenceRequest decode(ModelInferRequest request, BufferLease buffers, IntFunction<ByteBuffer> sharedMemoryBuffers) {
        int count = request.getInputsCount();
        boolean raw = request.getRawInputContentsCount() > 0;
        if (raw) {
            int carried = 0;
            for (int i = 0; i < count; i++) {
                carried += request.getInputs(i).getParametersMap().containsKey(TensorChecks.SHARED_MEMORY_REGION) ? 0 : 1;
            }
            if (request.getRawInputContentsCount() != carried) {
                throw new InvalidRequestException("raw_input_contents has " + request.getRawInputContentsCount()
                        + " entries for " + carried + " inputs" + (carried == count ? "" : " not in shared memory")
                        + "; give one per " + (carried == count ? "input" : "such input") + ", in order.");
            }
        }
        int nextRaw = 0;
        long sharedMemoryBytes = 0;
        List<Tensor> inputs = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            TensorChecks.requireInputSlot(i, limits);
            ModelInferRequest.InferInputTensor in = request.getInputs(i);
            if (in.getName().isEmpty()) {
                throw new InvalidRequestException("Input #" + i + " has no 'name'.");
            }
            String label = TensorChecks.label(in.getName());
            TensorChecks.requireFirstUse(inputs, in.getName());
            DataType type = TensorChecks.dataType(label, in.getDatatype());
            TensorChecks.requireRank(label, in.getShapeCount());
            long[] shape = new long[in.getShapeCount()];
            for (int d = 0; d < shape.length; d++) {
                shape[d] = in.getShape(d);
            }
            long elements = TensorChecks.elementCount(label, shape, limits);
            SharedMemoryReference at = sharedMemoryReference(label, in.getParametersMap());
            ByteBuffer data;
            if (at != null) {
                if (in.hasContents()) {
                    throw new InvalidRequestException(label + " has contents and " + TensorChecks.SHARED_MEMORY_REGION
                            + "; give one of them.");
                }
                data = sharedMemory.readInput(label, type, shape, elements, at, sharedMemoryBytes, sharedMemoryBuffers);
                sharedMemoryBytes += data.remaining();
            } else if (raw) {
                if (in.hasContents()) {
                    throw new InvalidRequestException(label + " has contents, but the request uses raw_input_contents;"
                            + " use one or the other.");
                }
                data = fromRaw(label, type, shape, elements, request.getRawInputContents(nextRaw++), buffers);
            } else {
                data = fromContents(label, type, shape, elements, in.getContents(), buffers);
            }
            inputs.add(new Tensor(in.getName(), type, shape, data));
        }
        return new InferenceRequest(request.getId().isEmpty() ? null : request.getId(),
                parameters(request.getParametersMap()), inputs, requestedOutputs(request), true);
    }

    /** The outputs asked for, refused as the REST decoder refuses them (no name, an extension, twice). */
    private static List<InferenceRequest.RequestedOutput> requestedOutputs(ModelInferRequest request) {
        int count = request.getOutputsCount();
        List<InferenceRequest.RequestedOutput> outputs = new ArrayList<>(count);
        Set<String> names = null;  // TensorChecks.requireRequestedOnce's, once many
        for (int i = 0; i < count; i++) {
            ModelInferRequest.InferRequestedOutputTensor out = request.getOutputs(i);
            if (out.getName().isEmpty()) {
                throw new InvalidRequestException("Requested output #" + i + " has no 'name'.");
            }
            String label = TensorChecks.requestedOutputLabel(out.getName());
            if (out.getParametersMap().containsKey(CLASSIFICATION)) {
                throw TensorChecks.classificationRefused(label);
            }
            SharedMemoryReference at = sharedMemoryReference(label, out.getParametersMap());
            names = TensorChecks.requireRequestedOnce(outputs, names, out.getName(), label);
            // Every output travels as a raw section over gRPC (Triton's way): binary_data is moot.
            outputs.add(new InferenceRequest.RequestedOutput(out.getName(), Boolean.TRUE, at));
        }
        return outputs;
    }


    /** A tensor's place in shared memory from its parameters, or null when they name no region. */
    private static SharedMemoryReference sharedMemoryReference(String label, Map<String, InferParameter> parameters) {
        if (parameters.isEmpty()) {
            return null;  // the usual tensor
        }
        return TensorChecks.sharedMemoryReference(label, value(parameters.get(TensorChecks.SHARED_MEMORY_REGION)),
                value(parameters.get(TensorChecks.SHARED_MEMORY_BYTE_SIZE)),
                value(parameters.get(TensorChecks.SHARED_MEMORY_OFFSET)));
    }

    /**
     * Every output as a raw section (what Triton's gRPC endpoint does), straight from its buffer;
     * one written to shared memory has an empty section, which keeps the sections' indexes the
     * outputs' (Triton's clients read them so).
     */
    static ModelInferResponse encode(InferenceResponse response) {
        ModelInferResponse.Builder b = ModelInferResponse.newBuilder().setModelName(response.modelName());
        if (response.modelVersion() != null) {
            b.setModelVersion(response.modelVersion());
        }
        if (response.id() != null) {
            b.setId(response.id());
        }
        for (Tensor t : response.outputs()) {
            ModelInferResponse.InferOutputTensor.Builder out = b.addOutputsBuilder().setName(t.name())
                    .setDatatype(t.dataType().protocolName());
            for (int d = 0; d < t.rank(); d++) {
                out.addShape(t.dim(d));
            }
            // The buffer is this call's alone, written no more, and given back only once the
            // message is serialized (grpc-java does that inside onNext). data() is a view already.
            b.addRawOutputContents(response.sharedMemoryOutputs().contains(t.name()) ? ByteString.EMPTY
                    : UnsafeByteOperations.unsafeWrap(t.data()));
        }
        return b.build();
    }

    /** The section is in the message already, so copying it first allocates nothing a client did not send. */
    private static ByteBuffer fromRaw(String label, DataType type, long[] shape, long elements, ByteString bytes,
            BufferLease buffers) {
        ByteBuffer data = buffers.acquire(bytes.size());
        bytes.copyTo(data);
        data.flip();
        TensorChecks.requireBytes(label, "has " + bytes.size() + " bytes of raw contents", type, shape, elements, data);
        return data;
    }

    /** Typed contents: counted against the shape before the tensor's buffer is allocated. */
    private static ByteBuffer fromContents(String label, DataType type, long[] shape, long elements,
            InferTensorContents c, BufferLease buffers) {
        if (type.kind() == DataType.Kind.BYTES) {
            requireOnly(label, type, "bytes_contents", c.getBytesContentsCount(), c);
            TensorChecks.requireValueCount(label, c.getBytesContentsCount(), "values in bytes_contents", shape, elements);
            return lengthPrefixed(c.getBytesContentsList(), buffers);
        }
        Contents field = Contents.of(type, c);
        if (field == null) {
            throw new InvalidRequestException(label + " is " + type.protocolName()
                    + ", which travels only in raw_input_contents.");
        }
        requireOnly(label, type, field.name(), field.count(), c);
        TensorChecks.requireValueCount(label, field.count(), "values in " + field.name(), shape, elements);
        ByteBuffer data = buffers.acquire(TensorChecks.byteSize(label, type, elements));
        // A 32-bit field carries the narrower integer types too: their values are range-checked.
        boolean narrower = field.bits() > type.byteSize() * Byte.SIZE;
        for (int i = 0; i < field.count(); i++) {
            long v = field.value().applyAsLong(i);
            if (narrower && !type.holds(v)) {
                throw new InvalidRequestException(label + " element " + i + " (" + v + ") is out of range for "
                        + type.protocolName() + ".");
            }
            type.putBits(data, v);
        }
        return data.flip();
    }

    /** Values in any contents field but the type's own ({@code name}, holding {@code count}) are refused, not ignored. */
    private static void requireOnly(String label, DataType type, String name, int count, InferTensorContents c) {
        long all = (long) c.getBoolContentsCount() + c.getIntContentsCount() + c.getInt64ContentsCount()
                + c.getUintContentsCount() + c.getUint64ContentsCount() + c.getFp32ContentsCount()
                + c.getFp64ContentsCount() + c.getBytesContentsCount();
        if (all != count) {
            throw new InvalidRequestException(label + " is " + type.protocolName() + ", whose values travel in " + name
                    + "; it has values in other contents fields too.");
        }
    }

    /** BYTES elements as the REST decoder stores them: a 4-byte little-endian length, then the bytes. */
    private static ByteBuffer lengthPrefixed(List<ByteString> elements, BufferLease buffers) {
        long size = 0;
        for (ByteString e : elements) {
            size += Integer.BYTES + e.size();
        }
        // Bounded by the message, which gRPC already held to its size limit.
        ByteBuffer data = buffers.acquire(size);
        for (ByteString e : elements) {
            data.putInt(e.size());
            e.copyTo(data);
        }
        return data.flip();
    }

    /**
     * The typed contents field that carries a type, chosen by its kind and width as Triton's
     * protocol assigns them; null for a type that has none (FP16, BF16).
     *
     * @param value element {@code i} as {@link DataType#putBits} takes it
     */
    private record Contents(String name, int count, int bits, IntToLongFunction value) {
        static Contents of(DataType type, InferTensorContents c) {
            boolean wide = type.byteSize() == Long.BYTES;
            return switch (type.kind()) {
                case BOOL -> new Contents("bool_contents", c.getBoolContentsCount(), 1,
                        i -> c.getBoolContents(i) ? 1 : 0);
                case SIGNED -> wide
                        ? new Contents("int64_contents", c.getInt64ContentsCount(), Long.SIZE, c::getInt64Contents)
                        : new Contents("int_contents", c.getIntContentsCount(), Integer.SIZE, c::getIntContents);
                case UNSIGNED -> wide
                        ? new Contents("uint64_contents", c.getUint64ContentsCount(), Long.SIZE, c::getUint64Contents)
                        : new Contents("uint_contents", c.getUintContentsCount(), Integer.SIZE,
                                i -> Integer.toUnsignedLong(c.getUintContents(i)));
                case FLOAT -> switch (type.byteSize()) {
                    case Float.BYTES -> new Contents("fp32_contents", c.getFp32ContentsCount(), Integer.SIZE,
                            i -> Float.floatToRawIntBits(c.getFp32Contents(i)));
                    case Double.BYTES -> new Contents("fp64_contents", c.getFp64ContentsCount(), Long.SIZE,
                            i -> Double.doubleToRawLongBits(c.getFp64Contents(i)));
                    default -> null;
                };
                case BYTES -> null;
            };
        }
    }

    private static Map<String, Object> parameters(Map<String, InferParameter> in) {
        if (in.isEmpty()) {
            return Map.of();  // the usual call: no map to build
        }
        Map<String, Object> out = new LinkedHashMap<>();
        in.forEach((k, p) -> {
            Object v = value(p);
            if (v != null) {
                out.put(k, v);
            }
        });
        return out;
    }

    /** A parameter's value as the REST decoder reads JSON's (uint64 as its digits), or null when unset or absent. */
    private static Object value(InferParameter p) {
        if (p == null) {
            return null;
        }
        return switch (p.getParameterChoiceCase()) {
            case BOOL_PARAM -> p.getBoolParam();
            case INT64_PARAM -> p.getInt64Param();
            case STRING_PARAM -> p.getStringParam();
            case DOUBLE_PARAM -> p.getDoubleParam();
            case UINT64_PARAM -> Long.toUnsignedString(p.getUint64Param());
            default -> null;
        };
    }
}
