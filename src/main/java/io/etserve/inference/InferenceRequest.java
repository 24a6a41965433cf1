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

    /** Whether an output asked for goes to shared memory: then the answer carries only its name, type and shape. */
    public boolean anyOutputInSharedMemory() {
        for (RequestedOutput o : outputs) {
            if (o.sharedMemory() != null) {
                return true;
            }
        }
        return false;
    }

    /**
     * An output named in the request; {@code binary} is its {@code binary_data} parameter,
     * {@code sharedMemory} where it is to be written instead of into the answer (null: the answer).
     */
    public record RequestedOutput(String name, Boolean binary, SharedMemoryReference sharedMemory) {

        public RequestedOutput(String name, Boolean binary) {
            this(name, binary, null);
        }
    }
}
