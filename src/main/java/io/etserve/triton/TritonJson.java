package io.etserve.triton;

import com.google.protobuf.ByteString;
import com.google.protobuf.Descriptors.EnumValueDescriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Message;
import java.math.BigInteger;
import java.util.List;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;
import tools.jackson.databind.node.ArrayNode;
import tools.jackson.databind.node.ObjectNode;

/**
 * A message of the model configuration or statistics extension as Triton's HTTP endpoints write
 * it, so REST and gRPC answer from one message: Triton's field names, every scalar and repeated
 * field even at its default (perf_analyzer reads {@code model_transaction_policy.decoupled}
 * without asking whether it is there), a sub-message only when set (so {@code dynamic_batching}
 * appears only for a model that batches and {@code sequence_batching} never), enums by name,
 * and 64-bit integers as JSON numbers (Triton turns protobuf JSON's strings back into numbers;
 * perf_analyzer reads statistics with {@code GetUint64}).
 */
public final class TritonJson {

    private static final JsonMapper JSON = JsonMapper.builder().build();

    private TritonJson() {}

    public static String write(Message message) {
        return JSON.writeValueAsString(tree(message));
    }

    public static ObjectNode tree(Message message) {
        ObjectNode out = JSON.createObjectNode();
        for (FieldDescriptor f : message.getDescriptorForType().getFields()) {
            if (f.isRepeated()) {
                ArrayNode array = out.putArray(f.getName());
                for (Object item : (List<?>) message.getField(f)) {
                    array.add(value(f, item));
                }
            } else if (f.getJavaType() == FieldDescriptor.JavaType.MESSAGE || f.getContainingOneof() != null) {
                if (message.hasField(f)) {
                    out.set(f.getName(), value(f, message.getField(f)));
                }
            } else {
                out.set(f.getName(), value(f, message.getField(f)));
            }
        }
        return out;
    }

    private static JsonNode value(FieldDescriptor f, Object v) {
        return switch (f.getType()) {
            case MESSAGE, GROUP -> tree((Message) v);
            case ENUM -> JSON.getNodeFactory().stringNode(((EnumValueDescriptor) v).getName());
            case BOOL -> JSON.getNodeFactory().booleanNode((Boolean) v);
            case STRING -> JSON.getNodeFactory().stringNode((String) v);
            case UINT64, FIXED64 -> JSON.getNodeFactory().numberNode(new BigInteger(Long.toUnsignedString((Long) v)));
            case UINT32, FIXED32 -> JSON.getNodeFactory().numberNode(Integer.toUnsignedLong((Integer) v));
            case INT64, SINT64, SFIXED64 -> JSON.getNodeFactory().numberNode((Long) v);
            case INT32, SINT32, SFIXED32 -> JSON.getNodeFactory().numberNode((Integer) v);
            case DOUBLE -> JSON.getNodeFactory().numberNode((Double) v);
            case FLOAT -> JSON.getNodeFactory().numberNode((Float) v);
            case BYTES -> JSON.getNodeFactory().binaryNode(((ByteString) v).toByteArray());
        };
    }
}
