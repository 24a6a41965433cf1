package io.etserve.inference;

import java.util.Arrays;
import java.util.Optional;

/**
 * Tensor element types of the Open Inference Protocol, with their ExecuTorch
 * {@code ScalarType} codes. BYTES has no ExecuTorch counterpart: it is accepted by the
 * protocol layer but refused by every model, since no ExecuTorch method takes strings.
 */
public enum DataType {
    BOOL("BOOL", 1, 11),
    UINT8("UINT8", 1, 0),
    UINT16("UINT16", 2, 27),
    UINT32("UINT32", 4, 28),
    UINT64("UINT64", 8, 29),
    INT8("INT8", 1, 1),
    INT16("INT16", 2, 2),
    INT32("INT32", 4, 3),
    INT64("INT64", 8, 4),
    FP16("FP16", 2, 5),
    BF16("BF16", 2, 15),
    FP32("FP32", 4, 6),
    FP64("FP64", 8, 7),
    BYTES("BYTES", 0, -1);

    private final String protocolName;
    private final int byteSize;
    private final int executorchCode;

    DataType(String protocolName, int byteSize, int executorchCode) {
        this.protocolName = protocolName;
        this.byteSize = byteSize;
        this.executorchCode = executorchCode;
    }

    /** The name on the wire, e.g. {@code "FP32"}. */
    public String protocolName() {
        return protocolName;
    }

    /** Bytes per element; 0 for BYTES, whose elements are length-prefixed. */
    public int byteSize() {
        return byteSize;
    }

    /** ExecuTorch's {@code ScalarType} code, or -1 when ExecuTorch has none. */
    public int executorchCode() {
        return executorchCode;
    }

    /** FP16 and BF16 travel only as binary data: JSON has no way to spell them exactly. */
    public boolean jsonRepresentable() {
        return this != FP16 && this != BF16;
    }

    public static Optional<DataType> fromProtocol(String name) {
        return Arrays.stream(values()).filter(t -> t.protocolName.equals(name)).findFirst();
    }

    public static Optional<DataType> fromExecutorch(int code) {
        return Arrays.stream(values()).filter(t -> t.executorchCode == code && code >= 0).findFirst();
    }
}
