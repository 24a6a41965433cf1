package io.etserve.protocol;

/**
 * Bounds the decoder enforces before it allocates anything for a request.
 *
 * @param maxElementsPerTensor most elements one input tensor may have
 * @param maxInputs most inputs one request may carry
 */
public record DecodeLimits(long maxElementsPerTensor, int maxInputs) {

    public DecodeLimits {
        if (maxElementsPerTensor < 0) {
            throw new IllegalArgumentException("maxElementsPerTensor must be >= 0, was " + maxElementsPerTensor);
        }
        if (maxInputs < 0) {
            throw new IllegalArgumentException("maxInputs must be >= 0, was " + maxInputs);
        }
    }
}
