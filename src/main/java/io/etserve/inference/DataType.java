package io.etserve.inference;

import java.nio.ByteBuffer;
import java.util.Optional;

/**
 * Tensor element types of the Open Inference Protocol, with their ExecuTorch
 * {@code ScalarType} codes. BYTES has no ExecuTorch counterpart: it is accepted by the
 * protocol layer but refused by every model, since no ExecuTorch method takes strings.
 *
 * <p>This table is the one place a type is described: the codecs (JSON, binary, gRPC typed
 * contents) and the warm-up derive what they do from {@link #kind()} and {@link #byteSize()},
 * so a new type is a row here plus its element size in the native bridge.
 */
public enum DataType {
    BOOL("BOOL", Kind.BOOL, 1, 11, true),
    UINT8("UINT8", Kind.UNSIGNED, 1, 0, true),
    UINT16("UINT16", Kind.UNSIGNED, 2, 27, true),
    UINT32("UINT32", Kind.UNSIGNED, 4, 28, true),
    UINT64("UINT64", Kind.UNSIGNED, 8, 29, true),
    INT8("INT8", Kind.SIGNED, 1, 1, true),
    INT16("INT16", Kind.SIGNED, 2, 2, true),
    INT32("INT32", Kind.SIGNED, 4, 3, true),
    INT64("INT64", Kind.SIGNED, 8, 4, true),
    // JSON has no way to spell a half-precision value exactly: binary data only.
    FP16("FP16", Kind.FLOAT, 2, 5, false),
    BF16("BF16", Kind.FLOAT, 2, 15, false),
    FP32("FP32", Kind.FLOAT, 4, 6, true),
    FP64("FP64", Kind.FLOAT, 8, 7, true),
    BYTES("BYTES", Kind.BYTES, 0, -1, true);

    /** How an element's bits read as a value. */
    public enum Kind {
        /** One byte, 0 or 1. */
        BOOL,
        /** Two's complement integer. */
        SIGNED,
        /** Unsigned integer. */
        UNSIGNED,
        /** IEEE 754 binary floating point (or bfloat16). */
        FLOAT,
        /** Variable-length elements, each a 4-byte little-endian length and then its bytes. */
        BYTES
    }

    private final String protocolName;
    private final Kind kind;
    private final int byteSize;
    private final int executorchCode;
    private final boolean jsonRepresentable;

    DataType(String protocolName, Kind kind, int byteSize, int executorchCode, boolean jsonRepresentable) {
        this.protocolName = protocolName;
        this.kind = kind;
        this.byteSize = byteSize;
        this.executorchCode = executorchCode;
        this.jsonRepresentable = jsonRepresentable;
    }

    /** The name on the wire, e.g. {@code "FP32"}. */
    public String protocolName() {
        return protocolName;
    }

    public Kind kind() {
        return kind;
    }

    /** Bytes per element; 0 for BYTES, whose elements are length-prefixed. */
    public int byteSize() {
        return byteSize;
    }

    /** ExecuTorch's {@code ScalarType} code, or -1 when ExecuTorch has none. */
    public int executorchCode() {
        return executorchCode;
    }

    /** Whether JSON {@code data} can carry it; the others travel only as binary data. */
    public boolean jsonRepresentable() {
        return jsonRepresentable;
    }

    /**
     * Whether an integer value fits this BOOL, SIGNED or UNSIGNED type. {@code value} is read as
     * signed: a 64-bit unsigned value above {@link Long#MAX_VALUE} is not representable here
     * (callers that receive such values as raw bits store them unchecked).
     */
    public boolean holds(long value) {
        int bits = byteSize * Byte.SIZE;
        return switch (kind) {
            case BOOL -> value == 0 || value == 1;
            case SIGNED -> bits == Long.SIZE || (value >= -(1L << (bits - 1)) && value < (1L << (bits - 1)));
            case UNSIGNED -> value >= 0 && (bits == Long.SIZE || value < (1L << bits));
            case FLOAT, BYTES -> throw new IllegalStateException(this + " elements are not integers");
        };
    }

    /**
     * Writes one element, little-endian, from the low {@link #byteSize()} bytes of {@code bits}
     * (an integer's value, or a float's {@code floatToRawIntBits} / {@code doubleToRawLongBits}).
     * The buffer must be little-endian.
     */
    public void putBits(ByteBuffer buffer, long bits) {
        switch (byteSize) {
            case 1 -> buffer.put((byte) bits);
            case 2 -> buffer.putShort((short) bits);
            case 4 -> buffer.putInt((int) bits);
            case 8 -> buffer.putLong(bits);
            default -> throw new IllegalStateException(this + " has no fixed-size elements");
        }
    }

    /**
     * Reads one element from a little-endian buffer: an integer's value (sign-extended for
     * SIGNED, zero-extended otherwise, so UINT64 comes back as its raw bits) or a float's bits.
     */
    public long getBits(ByteBuffer buffer) {
        boolean signed = kind == Kind.SIGNED;
        return switch (byteSize) {
            case 1 -> signed ? buffer.get() : Byte.toUnsignedLong(buffer.get());
            case 2 -> signed ? buffer.getShort() : Short.toUnsignedLong(buffer.getShort());
            case 4 -> signed ? buffer.getInt() : Integer.toUnsignedLong(buffer.getInt());
            case 8 -> buffer.getLong();
            default -> throw new IllegalStateException(this + " has no fixed-size elements");
        };
    }

    // Looked up for every tensor of every request: a loop over one shared array, no stream.
    private static final DataType[] ALL = values();

    public static Optional<DataType> fromProtocol(String name) {
        for (DataType t : ALL) {
            if (t.protocolName.equals(name)) {
                return Optional.of(t);
            }
        }
        return Optional.empty();
    }

    public static Optional<DataType> fromExecutorch(int code) {
        for (DataType t : ALL) {
            if (t.executorchCode == code && code >= 0) {
                return Optional.of(t);
            }
        }
        return Optional.empty();
    }
}
