package io.etserve.inference;

import java.util.List;
import java.util.Map;

/**
 * One decoded inference request, independent of how it travelled (JSON or binary).
 *
 * @param id optional request id, echoed in the response
 * @param parameters request-level parameters as sent (may be empty)
 * @param inputs the input tensors, in the order they were sent
 * @param outputs the outputs asked for; empty means all of them
 * @param binaryOutputByDefault {@code binary_data_output}: outputs not listed travel as binary
 */
public record InferenceRequest(
        String id,
        Map<String, Object> parameters,
        List<Tensor> inputs,
        List<RequestedOutput> outputs,
        boolean binaryOutputByDefault) {

    public InferenceRequest {
        parameters = parameters == null ? Map.of() : Map.copyOf(parameters);
        inputs = List.copyOf(inputs);
        outputs = outputs == null ? List.of() : List.copyOf(outputs);
    }

    /** An output named in the request; {@code binary} is its {@code binary_data} parameter. */
    public record RequestedOutput(String name, Boolean binary) {}
}
