package io.etserve.protocol;

import io.etserve.inference.DataType;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * The binary sections of a request (the binary tensor data extension), handed out in input
 * order as views of the body's buffer: no input's bytes are copied.
 */
final class BinaryTensorData {

    private final ByteBuffer sections;
    /** The next unread byte. */
    private int cursor;

    BinaryTensorData(ByteBuffer sections) {
        this.sections = sections;
    }

    /** The next input's section: {@code size} bytes, which must fit its shape and type. */
    ByteBuffer next(String label, DataType type, long[] shape, long count, long size) {
        int remaining = sections.limit() - cursor;
        if (size > remaining) {
            throw new InvalidRequestException(label + " declares binary_data_size " + size + " but only "
                    + remaining + " bytes of binary data remain.");
        }
        int length = (int) size;
        ByteBuffer data = sections.slice(cursor, length).order(ByteOrder.LITTLE_ENDIAN);
        TensorChecks.requireBytes(label, "declares binary_data_size " + length, type, shape, count, data);
        cursor += length;
        return data;
    }

    /** Every byte of binary data must belong to an input. */
    void requireAllRead() {
        if (cursor != sections.limit()) {
            throw new InvalidRequestException("The request carries " + sections.limit()
                    + " bytes of binary data but its inputs' binary_data_size add up to " + cursor + ".");
        }
    }
}
