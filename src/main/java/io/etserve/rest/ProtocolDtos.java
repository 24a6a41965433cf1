package io.etserve.rest;

import com.fasterxml.jackson.annotation.JsonInclude;
import java.util.List;

/** The protocol's JSON bodies other than inference itself (KServe v2 / Open Inference Protocol). */
final class ProtocolDtos {

    private ProtocolDtos() {}

    record ServerMetadata(String name, String version, List<String> extensions) {}

    record TensorMetadata(String name, String datatype, long[] shape) {}

    @JsonInclude(JsonInclude.Include.NON_NULL)
    record ModelMetadata(String name, List<String> versions, String platform, List<TensorMetadata> inputs,
            List<TensorMetadata> outputs) {}

    @JsonInclude(JsonInclude.Include.NON_NULL)
    record ModelReady(String name, boolean ready, String reason) {}

    record ErrorBody(String error) {}
}
