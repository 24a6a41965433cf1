package io.etserve.runtime;

import java.util.Arrays;

/**
 * A method input or output as the program declares it.
 *
 * @param tensor false for non-tensor values (ints, lists...), which the service cannot feed
 * @param scalarType ExecuTorch {@code ScalarType} code, -1 when not a tensor
 * @param sizes the planned sizes (for dynamic shapes, the upper bound)
 */
public record TensorSpec(boolean tensor, int scalarType, long[] sizes, boolean dynamic) {
    public TensorSpec {
        sizes = sizes.clone();
    }

    /** A static tensor: {@code sizes} are exact. */
    public TensorSpec(boolean tensor, int scalarType, long[] sizes) {
        this(tensor, scalarType, sizes, false);
    }

    @Override
    public long[] sizes() {
        return sizes.clone();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof TensorSpec t && tensor == t.tensor && scalarType == t.scalarType
                && Arrays.equals(sizes, t.sizes) && dynamic == t.dynamic;
    }

    @Override
    public int hashCode() {
        return 31 * Arrays.hashCode(sizes) + scalarType + (tensor ? 1 : 0);
    }

    @Override
    public String toString() {
        return tensor ? "Tensor[type " + scalarType + ", " + Arrays.toString(sizes) + (dynamic ? " dynamic" : "") + "]" : "NonTensor";
    }
}
