package io.etserve.inference;

import java.util.Arrays;

/** A named tensor of a model's signature, as the protocol's metadata endpoint lists it. */
public record TensorMetadata(String name, DataType dataType, long[] shape) {
    public TensorMetadata {
        shape = shape.clone();
    }

    @Override
    public long[] shape() {
        return shape.clone();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof TensorMetadata t && name.equals(t.name) && dataType == t.dataType
                && Arrays.equals(shape, t.shape);
    }

    @Override
    public int hashCode() {
        return name.hashCode() * 31 + Arrays.hashCode(shape);
    }
}
