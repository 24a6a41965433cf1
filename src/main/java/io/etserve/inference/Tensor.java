package io.etserve.inference;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Objects;

/**
 * A named tensor: element type, shape and row-major little-endian bytes.
 *
 * <p>Inputs arrive as direct buffers so the bridge reads them without copying; outputs are
 * Java-owned copies made by the bridge.
 */
public record Tensor(String name, DataType dataType, long[] shape, ByteBuffer data) {

    public Tensor {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(dataType, "dataType");
        shape = shape.clone();
        data = data.duplicate().order(ByteOrder.LITTLE_ENDIAN);
    }

    /** Elements implied by the shape; throws on overflow or a negative dimension. */
    public static long elementCount(long[] shape) {
        long n = 1;
        for (long d : shape) {
            if (d < 0) {
                throw new IllegalArgumentException("negative dimension in shape " + Arrays.toString(shape));
            }
            n = Math.multiplyExact(n, d);
        }
        return n;
    }

    public long elementCount() {
        return elementCount(shape);
    }

    /** Bytes of data ({@code data().remaining()} without a view). */
    public int byteSize() {
        return data.remaining();
    }

    /** Dimensions ({@code shape().length} without a copy). */
    public int rank() {
        return shape.length;
    }

    /** Dimension {@code i} ({@code shape()[i]} without a copy). */
    public long dim(int i) {
        return shape[i];
    }

    @Override
    public long[] shape() {
        return shape.clone();
    }

    @Override
    public ByteBuffer data() {
        return data.duplicate().order(ByteOrder.LITTLE_ENDIAN);
    }

    @Override
    public String toString() {
        return "Tensor[" + name + ", " + dataType + ", " + Arrays.toString(shape) + ", " + data.remaining() + " bytes]";
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Tensor t && name.equals(t.name) && dataType == t.dataType
                && Arrays.equals(shape, t.shape) && data.equals(t.data);
    }

    @Override
    public int hashCode() {
        return Objects.hash(name, dataType, Arrays.hashCode(shape), data);
    }
}
