package io.etserve.runtime;

import java.util.Arrays;

/**
 * A method input or output as the program declares it.
 *
 * @param tensor false for non-tensor values (ints, lists...), which the service cannot feed
 * @param scalarType ExecuTorch {@code ScalarType} code, -1 when not a tensor
 * @param sizes the planned sizes (for dynamic shapes, the upper bound)
 * @param planned false when the program leaves the value's memory to the caller (exported with
 *     {@code MemoryPlanningPass(alloc_graph_input=False, alloc_graph_output=False)}): the bridge
 *     then hands ExecuTorch the request's input buffer and the response's output buffer instead
 *     of copying into and out of the instance's planned memory (docs/large-tensors.md)
 */
public record TensorSpec(boolean tensor, int scalarType, long[] sizes, boolean dynamic, boolean planned) {
    public TensorSpec {
        sizes = sizes.clone();
    }

    /** A memory-planned tensor. */
    public TensorSpec(boolean tensor, int scalarType, long[] sizes, boolean dynamic) {
        this(tensor, scalarType, sizes, dynamic, true);
    }

    /** A static, memory-planned tensor: {@code sizes} are exact. */
    public TensorSpec(boolean tensor, int scalarType, long[] sizes) {
        this(tensor, scalarType, sizes, false, true);
    }

    @Override
    public long[] sizes() {
        return sizes.clone();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof TensorSpec t && tensor == t.tensor && scalarType == t.scalarType
                && Arrays.equals(sizes, t.sizes) && dynamic == t.dynamic && planned == t.planned;
    }

    @Override
    public int hashCode() {
        return 31 * Arrays.hashCode(sizes) + scalarType + (tensor ? 1 : 0);
    }

    @Override
    public String toString() {
        return tensor ? "Tensor[type " + scalarType + ", " + Arrays.toString(sizes) + (dynamic ? " dynamic" : "") + (planned ? "" : " unplanned") + "]" : "NonTensor";
    }
}
