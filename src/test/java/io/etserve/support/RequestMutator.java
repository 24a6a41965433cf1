package io.etserve.support;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.node.ArrayNode;
import tools.jackson.databind.node.JsonNodeFactory;
import tools.jackson.databind.node.ObjectNode;

/**
 * Seeded, random changes to a valid request, for tests that want every malformed variant to get
 * a clear refusal: a JSON tree with a value replaced, removed, added or repeated (values a client
 * might send by mistake or on purpose: wrong types, huge and negative numbers, long strings,
 * nesting), and raw bytes with bytes flipped, cut, or JSON punctuation put in. The same seed
 * gives the same requests, so a failure names what to replay.
 */
public final class RequestMutator {

    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;
    /** Keys the protocol knows, so additions reach the decoder's branches rather than being ignored. */
    private static final List<String> KEYS = List.of("id", "parameters", "inputs", "outputs", "name", "datatype",
            "shape", "data", "binary_data_size", "binary_data", "binary_data_output", "classification",
            "sequence_id", "priority", "timeout", "content_type", "shared_memory_region", "shared_memory_byte_size",
            "shared_memory_offset", "key", "offset", "byte_size", "\u00e9", "x".repeat(300));
    private static final List<byte[]> TOKENS = List.of(bytes("{"), bytes("}"), bytes("["), bytes("]"), bytes(","),
            bytes(":"), bytes("\""), bytes("\\"), bytes("\\u00"), bytes("1e999999"), bytes("-"), new byte[] {0},
            new byte[] {(byte) 0xff, (byte) 0xfe}, bytes("9".repeat(400)), bytes("null"), bytes("NaN"));

    private final Random random;

    public RequestMutator(long seed) {
        this.random = new Random(seed);
    }

    public Random random() {
        return random;
    }

    /** A copy of {@code request} with one to three changes somewhere in its tree. */
    public JsonNode mutate(JsonNode request) {
        JsonNode copy = request.deepCopy();
        int changes = 1 + random.nextInt(3);
        for (int i = 0; i < changes; i++) {
            List<JsonNode> containers = new ArrayList<>();
            collectContainers(copy, containers);
            JsonNode target = containers.get(random.nextInt(containers.size()));
            if (target instanceof ObjectNode object) {
                change(object);
            } else {
                change((ArrayNode) target);
            }
        }
        return copy;
    }

    /** {@code bytes} with one to four flips, cuts, insertions or a truncation. */
    public byte[] mutate(byte[] bytes) {
        List<Byte> b = new ArrayList<>(bytes.length + 16);
        for (byte x : bytes) {
            b.add(x);
        }
        int changes = 1 + random.nextInt(4);
        for (int c = 0; c < changes && !b.isEmpty(); c++) {
            int at = random.nextInt(b.size());
            int kind = random.nextInt(10);
            if (kind < 4) {
                b.set(at, (byte) random.nextInt(256));
            } else if (kind < 6) {
                b.subList(at, Math.min(b.size(), at + 1 + random.nextInt(20))).clear();
            } else if (kind < 9) {
                byte[] token = TOKENS.get(random.nextInt(TOKENS.size()));
                List<Byte> inserted = new ArrayList<>(token.length);
                for (byte x : token) {
                    inserted.add(x);
                }
                b.addAll(at, inserted);
            } else {
                b.subList(at, b.size()).clear();
            }
        }
        byte[] out = new byte[b.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = b.get(i);
        }
        return out;
    }

    /** A value of the kind that breaks assumptions: wrong type, out of range, empty, long, nested. */
    public JsonNode weirdValue() {
        switch (random.nextInt(24)) {
            case 0: return NODES.nullNode();
            case 1: return NODES.booleanNode(random.nextBoolean());
            case 2: return NODES.numberNode(-1);
            case 3: return NODES.numberNode(0);
            case 4: return NODES.numberNode(Integer.MAX_VALUE + 1L);
            case 5: return NODES.numberNode(Long.MAX_VALUE);
            case 6: return NODES.numberNode(Long.MIN_VALUE);
            case 7: return NODES.numberNode(new java.math.BigInteger("18446744073709551616"));
            case 8: return NODES.numberNode(1e308);
            case 9: return NODES.numberNode(1.5);
            case 10: return NODES.stringNode("");
            case 11: return NODES.stringNode("FP32");
            case 12: return NODES.stringNode("BYTES");
            case 13: return NODES.stringNode("\u0000");
            case 14: return NODES.stringNode("a".repeat(5000));
            case 15: return NODES.arrayNode();
            case 16: return NODES.objectNode();
            case 17: return NODES.arrayNode().add(NODES.arrayNode());
            case 18: return longs(-1, 16);
            case 19: return longs(1, 1L << 40);
            case 20: return longs(1, 16, 1);
            case 21: return longs(0);
            case 22: {
                ArrayNode many = NODES.arrayNode();
                for (int i = 0; i < 40; i++) {
                    many.add(1);
                }
                return many;
            }
            default: return NODES.arrayNode().add(NODES.stringNode("1"));
        }
    }

    private void change(ObjectNode object) {
        List<String> names = new ArrayList<>(object.propertyNames());
        int kind = random.nextInt(4);
        if (!names.isEmpty() && kind == 0) {
            object.remove(names.get(random.nextInt(names.size())));
        } else if (kind == 1 || names.isEmpty()) {
            object.set(KEYS.get(random.nextInt(KEYS.size())), weirdValue());
        } else {
            object.set(names.get(random.nextInt(names.size())), weirdValue());
        }
    }

    private void change(ArrayNode array) {
        int kind = random.nextInt(4);
        if (!array.isEmpty() && kind == 0) {
            array.remove(random.nextInt(array.size()));
        } else if (!array.isEmpty() && kind == 1) {
            // Repeat the elements: a tensor with more data than its shape, or more inputs than the model has.
            ArrayNode copy = array.deepCopy();
            for (int i = random.nextInt(20); i >= 0; i--) {
                array.addAll(copy.deepCopy());
            }
        } else if (!array.isEmpty() && kind == 2) {
            array.set(random.nextInt(array.size()), weirdValue());
        } else {
            array.add(weirdValue());
        }
    }

    private static void collectContainers(JsonNode node, List<JsonNode> into) {
        if (node.isContainer()) {
            into.add(node);
            for (JsonNode child : node.values()) {
                collectContainers(child, into);
            }
        }
    }

    private static ArrayNode longs(long... values) {
        ArrayNode a = NODES.arrayNode();
        for (long v : values) {
            a.add(v);
        }
        return a;
    }

    private static byte[] bytes(String s) {
        return s.getBytes(java.nio.charset.StandardCharsets.UTF_8);
    }
}
