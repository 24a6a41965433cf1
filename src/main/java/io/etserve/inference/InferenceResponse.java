package io.etserve.inference;

import java.util.List;
import java.util.Set;

/**
 * The result of one inference, ready for encoding.
 *
 * @param binaryOutputs names of the outputs that travel as binary data
 */
public record InferenceResponse(
        String modelName, String modelVersion, String id, List<Tensor> outputs, Set<String> binaryOutputs) {

    public InferenceResponse {
        outputs = List.copyOf(outputs);
        binaryOutputs = Set.copyOf(binaryOutputs);
    }
}
