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
import io.etserve.inference.Tensor;
import io.etserve.protocol.DecodeLimits;
import io.etserve.protocol.InvalidRequestException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * ModelInfer messages to and from the inference layer's request and response: the gRPC twin of
 * the REST decoder and encoder. It only translates (names, datatypes, shapes, bytes); whether the
 * tensors fit the model's method is the inference layer's contract, as for REST.
 *
 * <p>Copies: in, each raw section or typed list into one direct buffer (the bridge reads it in
 * place); out, none here: each output's direct buffer is wrapped as the response's raw section
 * and serialized from there.
 */
final class GrpcTensors {

    private final DecodeLimits limits;

    GrpcTensors(DecodeLimits limits) {
        this.limits = limits;
    }

    InferenceRequest decode(ModelInferRequest request) {
        int count = request.getInputsCount();
        if (count > limits.maxInputs()) {
            throw new InvalidRequestException("the request has " + count + " inputs, more than the limit of "
                    + limits.maxInputs());
        }
        boolean raw = request.getRawInputContentsCount() > 0;
        if (raw && request.getRawInputContentsCount() != count) {
            throw new InvalidRequestException("raw_input_contents has " + request.getRawInputContentsCount()
                    + " entries for " + count + " inputs; give one per input, in order");
        }
        Set<String> names = new HashSet<>();
        List<Tensor> inputs = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            ModelInferRequest.InferInputTensor in = request.getInputs(i);
            String name = in.getName();
            if (name.isEmpty()) {
                throw new InvalidRequestException("input " + i + " has no name");
            }
            if (!names.add(name)) {
                throw new InvalidRequestException("input '" + name + "' is given twice");
            }
            DataType type = DataType.fromProtocol(in.getDatatype()).orElseThrow(() -> new InvalidRequestException(
                    "input '" + name + "' has unknown datatype '" + in.getDatatype() + "'"));
            if (type == DataType.BYTES) {
                throw new InvalidRequestException("input '" + name + "' is BYTES: ExecuTorch methods take no strings");
            }
            long[] shape = in.getShapeList().stream().mapToLong(Long::longValue).toArray();
            long elements = elements(name, shape);
            if (raw && in.hasContents()) {
                throw new InvalidRequestException("input '" + name + "' has contents, but the request uses "
                        + "raw_input_contents; use one or the other");
            }
            ByteBuffer data = raw ? fromRaw(name, type, elements, request.getRawInputContents(i))
                    : fromContents(name, type, elements, in.getContents());
            inputs.add(new Tensor(name, type, shape, data));
        }
        List<InferenceRequest.RequestedOutput> outputs = new ArrayList<>();
        for (ModelInferRequest.InferRequestedOutputTensor out : request.getOutputsList()) {
            outputs.add(new InferenceRequest.RequestedOutput(out.getName(), Boolean.TRUE));
        }
        return new InferenceRequest(request.getId().isEmpty() ? null : request.getId(),
                parameters(request.getParametersMap()), inputs, outputs, true);
    }

    /** Every output as a raw section (what Triton's gRPC endpoint does), straight from its buffer. */
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
            for (long d : t.shape()) {
                out.addShape(d);
            }
            // The buffer is this response's alone (fresh per call) and never written again.
            b.addRawOutputContents(UnsafeByteOperations.unsafeWrap(t.data().duplicate()));
        }
        return b.build();
    }

    private long elements(String name, long[] shape) {
        long n = 1;
        for (long d : shape) {
            if (d < 0) {
                throw new InvalidRequestException("input '" + name + "' has a negative dimension in its shape");
            }
            n = d == 0 ? 0 : (n > limits.maxElementsPerTensor() / d + 1 ? Long.MAX_VALUE : n * d);
        }
        if (n > limits.maxElementsPerTensor()) {
            throw new InvalidRequestException("input '" + name + "' has more elements than the limit of "
                    + limits.maxElementsPerTensor());
        }
        return n;
    }

    private static ByteBuffer fromRaw(String name, DataType type, long elements, ByteString bytes) {
        long expected = elements * type.byteSize();
        if (bytes.size() != expected) {
            throw new InvalidRequestException("raw contents of input '" + name + "' hold " + bytes.size()
                    + " bytes; shape and " + type.protocolName() + " need " + expected);
        }
        ByteBuffer data = ByteBuffer.allocateDirect(bytes.size()).order(ByteOrder.LITTLE_ENDIAN);
        bytes.copyTo(data);
        return data.flip();
    }

    private static ByteBuffer fromContents(String name, DataType type, long elements, InferTensorContents c) {
        ByteBuffer data = ByteBuffer.allocateDirect(Math.toIntExact(elements * type.byteSize()))
                .order(ByteOrder.LITTLE_ENDIAN);
        int given = switch (type) {
            case BOOL -> count(name, elements, c.getBoolContentsCount(), "bool_contents");
            case INT8, INT16, INT32 -> count(name, elements, c.getIntContentsCount(), "int_contents");
            case INT64 -> count(name, elements, c.getInt64ContentsCount(), "int64_contents");
            case UINT8, UINT16, UINT32 -> count(name, elements, c.getUintContentsCount(), "uint_contents");
            case UINT64 -> count(name, elements, c.getUint64ContentsCount(), "uint64_contents");
            case FP32 -> count(name, elements, c.getFp32ContentsCount(), "fp32_contents");
            case FP64 -> count(name, elements, c.getFp64ContentsCount(), "fp64_contents");
            default -> throw new InvalidRequestException("input '" + name + "' is " + type.protocolName()
                    + ", which travels only in raw_input_contents");
        };
        for (int i = 0; i < given; i++) {
            switch (type) {
                case BOOL -> data.put((byte) (c.getBoolContents(i) ? 1 : 0));
                case INT8 -> data.put((byte) ranged(name, c.getIntContents(i), Byte.MIN_VALUE, Byte.MAX_VALUE));
                case INT16 -> data.putShort((short) ranged(name, c.getIntContents(i), Short.MIN_VALUE, Short.MAX_VALUE));
                case INT32 -> data.putInt(c.getIntContents(i));
                case INT64 -> data.putLong(c.getInt64Contents(i));
                case UINT8 -> data.put((byte) ranged(name, Integer.toUnsignedLong(c.getUintContents(i)), 0, 0xFF));
                case UINT16 -> data.putShort((short) ranged(name, Integer.toUnsignedLong(c.getUintContents(i)), 0, 0xFFFF));
                case UINT32 -> data.putInt(c.getUintContents(i));
                case UINT64 -> data.putLong(c.getUint64Contents(i));
                case FP32 -> data.putFloat(c.getFp32Contents(i));
                case FP64 -> data.putDouble(c.getFp64Contents(i));
                default -> throw new IllegalStateException(type.name());
            }
        }
        return data.flip();
    }

    private static int count(String name, long elements, int given, String field) {
        if (given != elements) {
            throw new InvalidRequestException("input '" + name + "' has " + given + " values in " + field
                    + "; its shape needs " + elements);
        }
        return given;
    }

    private static long ranged(String name, long v, long min, long max) {
        if (v < min || v > max) {
            throw new InvalidRequestException("input '" + name + "' holds " + v + ", outside its datatype's range");
        }
        return v;
    }

    private static Map<String, Object> parameters(Map<String, InferParameter> in) {
        Map<String, Object> out = new LinkedHashMap<>();
        in.forEach((k, p) -> {
            switch (p.getParameterChoiceCase()) {
                case BOOL_PARAM -> out.put(k, p.getBoolParam());
                case INT64_PARAM -> out.put(k, p.getInt64Param());
                case STRING_PARAM -> out.put(k, p.getStringParam());
                case DOUBLE_PARAM -> out.put(k, p.getDoubleParam());
                case UINT64_PARAM -> out.put(k, Long.toUnsignedString(p.getUint64Param()));
                default -> { }
            }
        });
        return out;
    }
}
