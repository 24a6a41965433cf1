package io.etserve.rest;

import io.etserve.protocol.PublicMessages;
import io.etserve.repository.RepositoryControl;
import io.etserve.triton.TritonExtensions;
import java.util.List;
import java.util.Map;
import org.springframework.http.MediaType;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestMapping;
import org.springframework.web.bind.annotation.RestController;

/**
 * Triton's model repository extension: the index (every mode), and load / unload of one model
 * ({@code etserve.repository.mode=explicit} only: in the other modes the repository on disk
 * decides what serves).
 */
@RestController
@RequestMapping("/v2/repository")
public class RepositoryController {

    /** A row of the index: a model version (or a model without one that loaded) and its state. */
    record IndexEntry(String name, String version, String state, String reason) {}

    /** A repository model that is not loaded: its name only, as Triton's index lists it. */
    record NotLoadedEntry(String name) {}

    private final RepositoryControl repository;
    private final PublicMessages messages;
    private final TritonExtensions triton;

    public RepositoryController(RepositoryControl repository, PublicMessages messages, TritonExtensions triton) {
        this.repository = repository;
        this.messages = messages;
        this.triton = triton;
    }

    /**
     * Body (optional): {@code {"ready": true}} for the models that serve only; read as bytes, as
     * the load's (Triton's clients send it without a Content-Type). The {@code produces} of these
     * mappings is checked before they act: an unload refused 406 unloads nothing.
     */
    @PostMapping(value = "/index", consumes = {MediaType.APPLICATION_JSON_VALUE,
            MediaType.APPLICATION_OCTET_STREAM_VALUE}, produces = MediaType.APPLICATION_JSON_VALUE)
    List<Object> index(@RequestBody(required = false) byte[] body) {
        return repository.index(TritonExtensions.indexReadyOnly(body)).stream()
                .map(r -> r.notLoaded() ? (Object) new NotLoadedEntry(r.name())
                        : new IndexEntry(r.name(), r.version(), r.state(),
                                r.reason() == null ? null : messages.redact(r.reason())))
                .toList();
    }

    /**
     * Body (optional, as Triton's): {@code {"parameters": {"config": "<model configuration JSON>"}}}
     * loads with that configuration mapped onto config.yml ({@link io.etserve.triton.ConfigOverride}).
     * Read as bytes: Triton's clients send the body without a Content-Type (read as octet-stream).
     */
    @PostMapping(value = "/models/{model}/load", consumes = {MediaType.APPLICATION_JSON_VALUE,
            MediaType.APPLICATION_OCTET_STREAM_VALUE}, produces = MediaType.APPLICATION_JSON_VALUE)
    Map<String, Object> load(@PathVariable String model, @RequestBody(required = false) byte[] body) {
        triton.load(model, TritonExtensions.loadConfig(body));
        return Map.of();
    }

    @PostMapping(value = "/models/{model}/unload", produces = MediaType.APPLICATION_JSON_VALUE)
    Map<String, Object> unload(@PathVariable String model) {
        repository.unload(model);
        return Map.of();
    }
}
