package io.etserve.inference;

import io.etserve.runtime.MethodSignature;
import java.util.List;

/**
 * What one model version's served method declares, under the protocol's names: its metadata,
 * whether or not this node can run it.
 */
public record ModelDescription(String name, String version, MethodSignature signature, List<TensorMetadata> inputs,
        List<TensorMetadata> outputs) {

    public ModelDescription {
        inputs = List.copyOf(inputs);
        outputs = List.copyOf(outputs);
    }
}
