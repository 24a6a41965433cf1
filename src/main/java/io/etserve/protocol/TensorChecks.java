package io.etserve.protocol;

import io.etserve.inference.DataType;
import io.etserve.inference.InferenceRequest.RequestedOutput;
import io.etserve.inference.SharedMemoryReference;
import io.etserve.inference.Tensor;
import io.etserve.inference.UntrustedText;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * What the REST and gRPC decoders both check about a request's inputs and requested outputs on
 * their own, before any model is involved: that the request is well formed (known datatypes,
 * names given once, at most {@link #MAX_RANK} dimensions, bytes that fit the declared shape, no
 * extension this server lacks) and within the server's size limits, checked before tensor
 * memory is allocated. Whether the inputs fit a model's method is {@code TensorContract}'s
 * question, never a decoder's. Every refusal is an {@link InvalidRequestException} naming the
 * input, in the same words over both protocols.
 */
public final class TensorChecks {

    /** Largest tensor a direct buffer can hold. */
    static final long MAX_TENSOR_BYTES = Integer.MAX_VALUE;
    /** Most dimensions a shape may have; ExecuTorch itself allows 16. */
    static final int MAX_RANK = 32;
    /** Requested outputs checked for repeats by a scan; past this many, by a set. */
    private static final int FEW_OUTPUTS = 8;
    private static final int MAX_QUOTED_LENGTH = 100;

    private static final KeptLabels INPUT_LABELS = new KeptLabels("Input ");
    private static final KeptLabels REQUESTED_OUTPUT_LABELS = new KeptLabels("Requested output ");

    private TensorChecks() {}

    /** How messages name an input: {@code Input 'x'}. */
    public static String label(String name) {
        return INPUT_LABELS.of(name);
    }

    /** How messages name an output the request asks for: {@code Requested output 'x'}. */
    public static String requestedOutputLabel(String name) {
        return REQUESTED_OUTPUT_LABELS.of(name);
    }

    /** Refuses the input at {@code index} (0-based) when the request already has the most allowed. */
    public static void requireInputSlot(int index, DecodeLimits limits) {
        if (index >= limits.maxInputs()) {
            throw new InvalidRequestException("The request has more than " + limits.maxInputs()
                    + " inputs, the most allowed.");
        }
    }

    /**
     * Refuses {@code name} when an input decoded before it ({@code earlier}) has it. A scan, not a
     * set per request: {@link #requireInputSlot} bounds the inputs (64 by default).
     */
    public static void requireFirstUse(List<Tensor> earlier, String name) {
        for (Tensor t : earlier) {
            if (t.name().equals(name)) {
                throw new InvalidRequestException(label(name) + " appears more than once.");
            }
        }
    }

    /** Refuses a shape of {@code rank} dimensions past {@link #MAX_RANK}. */
    public static void requireRank(String label, int rank) {
        if (rank > MAX_RANK) {
            throw new InvalidRequestException(label + " has more than " + MAX_RANK + " dimensions.");
        }
    }

    /** The refusal of a tensor that names a shared-memory region where none can be used (a warm-up file). */
    public static InvalidRequestException sharedMemoryRefused(String label) {
        return new InvalidRequestException(label + " uses shared memory, which cannot be used here.");
    }

    /** The parameters that place a tensor in shared memory (Triton's system shared-memory extension). */
    public static final String SHARED_MEMORY_REGION = "shared_memory_region";
    public static final String SHARED_MEMORY_BYTE_SIZE = "shared_memory_byte_size";
    public static final String SHARED_MEMORY_OFFSET = "shared_memory_offset";

    /**
     * A tensor's place in shared memory from its parameters as the decoders read them (a string,
     * and integers as {@link Long}, {@link java.math.BigInteger} or a string of digits over gRPC's
     * {@code uint64_param}), or null when it names no region. The byte size is required with a
     * region, as Triton's gRPC endpoint requires it; neither it nor the offset may come without one.
     */
    public static SharedMemoryReference sharedMemoryReference(String label, Object region, Object byteSize,
            Object offset) {
        if (region == null) {
            if (byteSize != null || offset != null) {
                throw new InvalidRequestException(label + " has " + (byteSize != null ? SHARED_MEMORY_BYTE_SIZE
                        : SHARED_MEMORY_OFFSET) + " but no " + SHARED_MEMORY_REGION + ".");
            }
            return null;
        }
        if (!(region instanceof String name) || name.isEmpty()) {
            throw new InvalidRequestException(label + " parameter '" + SHARED_MEMORY_REGION
                    + "' must be a region's name (a non-empty string).");
        }
        if (byteSize == null) {
            throw new InvalidRequestException(label + " has " + SHARED_MEMORY_REGION + " but no "
                    + SHARED_MEMORY_BYTE_SIZE + ".");
        }
        return new SharedMemoryReference(name, wholeNumber(label, SHARED_MEMORY_OFFSET, offset == null ? 0L : offset),
                wholeNumber(label, SHARED_MEMORY_BYTE_SIZE, byteSize));
    }

    private static long wholeNumber(String label, String parameter, Object value) {
        if (value instanceof Long n && n >= 0) {
            return n;
        }
        if (value instanceof String digits && !digits.isEmpty() && digits.length() < 19 && digits.chars().allMatch(
                c -> c >= '0' && c <= '9')) {
            return Long.parseLong(digits);
        }
        throw new InvalidRequestException(label + " parameter '" + parameter
                + "' must be a whole number of bytes, 0 to 2^63 - 1.");
    }

    /** The refusal of a requested output that asks for classification (Triton's extension, not served here). */
    public static InvalidRequestException classificationRefused(String label) {
        return new InvalidRequestException(label + " asks for classification, which this server does not support.");
    }

    /**
     * Refuses the output {@code name} (named {@code label} in messages) when one requested before
     * it ({@code earlier}) has it: a scan while few (no set per request), then a set, since
     * nothing else bounds a request's outputs. Pass back the set it returns (null at first).
     */
    public static Set<String> requireRequestedOnce(List<RequestedOutput> earlier, Set<String> names, String name,
            String label) {
        Set<String> seen = names;
        if (seen == null && earlier.size() == FEW_OUTPUTS) {
            seen = new HashSet<>();
            for (RequestedOutput o : earlier) {
                seen.add(o.name());
            }
        }
        if (seen != null ? !seen.add(name) : requested(earlier, name)) {
            throw new InvalidRequestException(label + " is requested more than once.");
        }
        return seen;
    }

    private static boolean requested(List<RequestedOutput> outputs, String name) {
        for (RequestedOutput o : outputs) {
            if (o.name().equals(name)) {
                return true;
            }
        }
        return false;
    }

    public static DataType dataType(String label, String name) {
        return DataType.fromProtocol(name).orElseThrow(() ->
                new InvalidRequestException(label + " has unknown datatype " + quote(name) + "."));
    }

    /**
     * The shape's element count, refused for a negative dimension, a count past 64 bits or one
     * over the server's per-tensor limit: checked before anything is allocated for the tensor.
     */
    public static long elementCount(String label, long[] shape, DecodeLimits limits) {
        boolean empty = false;
        for (long d : shape) {
            if (d < 0) {
                throw new InvalidRequestException(label + " has negative dimension " + d + " in its shape.");
            }
            empty |= d == 0;
        }
        long count = empty ? 0 : 1;
        if (!empty) {
            try {
                for (long d : shape) {
                    count = Math.multiplyExact(count, d);
                }
            } catch (ArithmeticException e) {
                throw new InvalidRequestException(label + " has shape " + Arrays.toString(shape)
                        + ", whose element count overflows 64 bits.");
            }
        }
        if (count > limits.maxElementsPerTensor()) {
            throw new InvalidRequestException(label + " has " + count + " elements, more than the limit of "
                    + limits.maxElementsPerTensor() + " per tensor.");
        }
        return count;
    }

    /** Bytes of {@code count} elements of a fixed-size type, refused past what one buffer holds. */
    public static int byteSize(String label, DataType type, long count) {
        if (count > MAX_TENSOR_BYTES / type.byteSize()) {
            throw new InvalidRequestException(label + " would need more than " + MAX_TENSOR_BYTES
                    + " bytes, the most one tensor can hold.");
        }
        return (int) (count * type.byteSize());
    }

    /** Values given one by one (JSON elements, a gRPC typed contents field) against the shape's count. */
    public static void requireValueCount(String label, long given, String what, long[] shape, long count) {
        if (given != count) {
            throw new InvalidRequestException(label + " has " + given + " " + what + " but its shape "
                    + Arrays.toString(shape) + " needs " + count + ".");
        }
    }

    /**
     * An input's bytes against its shape: exactly {@code count} elements of a fixed-size type,
     * or exactly {@code count} length-prefixed BYTES elements.
     *
     * @param claim how the request gave the size, for the message ({@code declares binary_data_size 4})
     */
    public static void requireBytes(String label, String claim, DataType type, long[] shape, long count,
            ByteBuffer data) {
        if (type.kind() == DataType.Kind.BYTES) {
            requireLengthPrefixed(label, count, data.duplicate().order(ByteOrder.LITTLE_ENDIAN));
            return;
        }
        requireByteSize(label, claim, type, shape, count, data.remaining());
        if (type == DataType.BOOL) {
            requireBooleans(label, data);
        }
    }

    /** {@code given} bytes against {@code count} elements of a fixed-size type, as {@link #requireBytes} checks them. */
    public static void requireByteSize(String label, String claim, DataType type, long[] shape, long count,
            long given) {
        int expected = byteSize(label, type, count);
        if (given != expected) {
            String elements = count + " " + type.protocolName() + (count == 1 ? " element" : " elements");
            throw new InvalidRequestException(label + " " + claim + ", but " + elements + " (shape "
                    + Arrays.toString(shape) + ") " + (count == 1 ? "needs " : "need ") + expected + " bytes.");
        }
    }

    /**
     * BOOL bytes must be 0 or 1: the kernels read them as C++ {@code bool}, for which any other
     * value is undefined (JSON and gRPC's {@code bool_contents} can only say 0 or 1).
     */
    private static void requireBooleans(String label, ByteBuffer data) {
        int i = data.position();
        ByteBuffer longs = data.duplicate().order(ByteOrder.LITTLE_ENDIAN);
        // Eight at a time while all are 0 or 1 (no bit but the lowest of each byte set).
        while (i + Long.BYTES <= data.limit() && (longs.getLong(i) & 0xFEFEFEFEFEFEFEFEL) == 0) {
            i += Long.BYTES;
        }
        for (; i < data.limit(); i++) {
            byte b = data.get(i);
            if (b != 0 && b != 1) {
                throw new InvalidRequestException(label + " BOOL element " + (i - data.position()) + " is byte " + (b & 0xff)
                        + "; a BOOL element is the byte 0 or 1.");
            }
        }
    }

    /** BYTES data must be exactly {@code count} (4-byte little-endian length, bytes) pairs. */
    private static void requireLengthPrefixed(String label, long count, ByteBuffer view) {
        for (long i = 0; i < count; i++) {
            if (view.remaining() < Integer.BYTES) {
                throw new InvalidRequestException(label + " binary BYTES data ends before element " + i + " of "
                        + count + ".");
            }
            int elementLength = view.getInt();
            if (elementLength < 0 || elementLength > view.remaining()) {
                throw new InvalidRequestException(label + " binary BYTES element " + i + " declares "
                        + Integer.toUnsignedString(elementLength) + " bytes, more than its data holds.");
            }
            view.position(view.position() + elementLength);
        }
        if (view.hasRemaining()) {
            throw new InvalidRequestException(label + " binary BYTES data has " + view.remaining()
                    + " bytes after its " + count + " elements.");
        }
    }

    /** A client's text in a message: quoted, shortened, control and formatting characters escaped. */
    static String quote(String s) {
        return "'" + abbreviate(s) + "'";
    }

    /** A client's text in a message, unquoted: shortened, control and formatting characters escaped. */
    static String abbreviate(String s) {
        return UntrustedText.abbreviate(s, MAX_QUOTED_LENGTH);
    }

    /**
     * Labels are passed along every decode but read only by error messages, and a model's requests
     * carry the same few names, so a name's label is built once and kept rather than built per
     * request. Bounded in count and name length, so that hostile names cannot grow it.
     */
    private static final class KeptLabels {
        private static final int MAX_KEPT = 1024;
        private static final int MAX_KEPT_NAME_LENGTH = 64;

        private final String prefix;
        private final ConcurrentHashMap<String, String> labels = new ConcurrentHashMap<>();

        KeptLabels(String prefix) {
            this.prefix = prefix;
        }

        String of(String name) {
            String label = labels.get(name);
            if (label == null) {
                label = prefix + quote(name);
                if (name.length() <= MAX_KEPT_NAME_LENGTH && labels.size() < MAX_KEPT) {
                    labels.putIfAbsent(name, label);
                }
            }
            return label;
        }
    }
}
