package io.etserve.inference;

/**
 * What happens to a call's outputs before its answer is encoded, as part of the call: outputs the
 * request asked for in shared memory are written there ({@code SharedMemoryRegions}). A refusal
 * (an output larger than the room its request gave) fails the call, and is counted as its outcome.
 */
@FunctionalInterface
public interface OutputDelivery {

    /** Nothing to deliver: every output goes in the answer. */
    OutputDelivery NONE = (request, response) -> response;

    /**
     * {@code response} as the answer should carry it, once its outputs are where {@code request}
     * asked for them.
     *
     * @throws InvalidInputException when an output cannot go where it was asked for
     */
    InferenceResponse deliver(InferenceRequest request, InferenceResponse response);
}
