package io.etserve.inference;

import java.util.List;
import java.util.Set;

/**
 * The result of one inference, ready for encoding.
 *
 * @param binaryOutputs names of the outputs that travel as binary data
 * @param sharedMemoryOutputs names of the outputs written to shared memory: the answer carries
 *     their name, datatype and shape only
 */
public record InferenceResponse(String modelName, String modelVersion, String id, List<Tensor> outputs,
        Set<String> binaryOutputs, Set<String> sharedMemoryOutputs) {

    public InferenceResponse {
        outputs = List.copyOf(outputs);
        binaryOutputs = Set.copyOf(binaryOutputs);
        sharedMemoryOutputs = Set.copyOf(sharedMemoryOutputs);
    }

    public InferenceResponse(String modelName, String modelVersion, String id, List<Tensor> outputs,
            Set<String> binaryOutputs) {
        this(modelName, modelVersion, id, outputs, binaryOutputs, Set.of());
    }

    /** This response with {@code names} written to shared memory. */
    public InferenceResponse withSharedMemoryOutputs(Set<String> names) {
        return new InferenceResponse(modelName, modelVersion, id, outputs, binaryOutputs, names);
    }
}
