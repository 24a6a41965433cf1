package io.etserve.protocol;

import io.etserve.inference.DataType;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;

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
        if (type == DataType.BYTES) {
            requireLengthPrefixed(label, count, cursor, length);
        } else {
            long expected = InferRequestDecoder.fixedByteSize(label, type, count);
            if (length != expected) {
                throw new InvalidRequestException(label + " declares binary_data_size " + length + " but shape "
                        + Arrays.toString(shape) + " of " + type.protocolName() + " needs " + expected + " bytes.");
            }
        }
        ByteBuffer data = sections.slice(cursor, length).order(ByteOrder.LITTLE_ENDIAN);
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

    /** Binary BYTES data must be exactly {@code count} (length, bytes) pairs. */
    private void requireLengthPrefixed(String label, long count, int start, int length) {
        ByteBuffer view = sections.slice(start, length).order(ByteOrder.LITTLE_ENDIAN);
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
}
