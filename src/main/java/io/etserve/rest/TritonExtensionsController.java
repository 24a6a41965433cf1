package io.etserve.rest;

import io.etserve.triton.TritonExtensions;
import io.etserve.triton.TritonJson;
import org.springframework.http.MediaType;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.RequestMapping;
import org.springframework.web.bind.annotation.RestController;

/**
 * Triton's model configuration and statistics extensions over REST, in Triton's JSON
 * ({@link TritonJson}), from the same messages gRPC answers with.
 */
@RestController
@RequestMapping("/v2/models")
public class TritonExtensionsController {

    private static final String JSON = MediaType.APPLICATION_JSON_VALUE;

    private final TritonExtensions triton;

    public TritonExtensionsController(TritonExtensions triton) {
        this.triton = triton;
    }

    @GetMapping(value = {"/{model}/config", "/{model}/versions/{version}/config"}, produces = JSON)
    String config(@PathVariable String model, @PathVariable(required = false) String version) {
        return TritonJson.write(triton.config(model, version));
    }

    /** Every serving version of every model. */
    @GetMapping(value = "/stats", produces = JSON)
    String statistics() {
        return TritonJson.write(triton.statistics(null, null));
    }

    @GetMapping(value = {"/{model}/stats", "/{model}/versions/{version}/stats"}, produces = JSON)
    String statistics(@PathVariable String model, @PathVariable(required = false) String version) {
        return TritonJson.write(triton.statistics(model, version));
    }
}
