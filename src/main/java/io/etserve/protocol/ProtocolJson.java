package io.etserve.protocol;

import tools.jackson.core.StreamReadConstraints;
import tools.jackson.core.json.JsonFactory;

/** The one Jackson factory the codecs share; factories are thread-safe and costly to build. */
final class ProtocolJson {

    /**
     * Deepest JSON nesting accepted anywhere in a request. Jackson enforces it while parsing, so
     * hostile nesting ends in an error rather than a deep stack or a large token buffer.
     */
    static final int MAX_NESTING_DEPTH = 64;

    static final JsonFactory FACTORY = JsonFactory.builder()
            .streamReadConstraints(StreamReadConstraints.builder().maxNestingDepth(MAX_NESTING_DEPTH).build())
            // No STRICT_DUPLICATE_DETECTION: the decoder refuses a repeated field it reads itself
            // (InferRequestDecoder's once()) without a set of names per object.
            // Responses are written by JsonBytes; this factory writes only error bodies.
            .build();

    private ProtocolJson() {}
}
