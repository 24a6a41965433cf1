package io.etserve.rest;

import io.etserve.protocol.PublicMessages;
import io.etserve.repository.RepositoryControl;
import io.etserve.triton.TritonExtensions;
import jakarta.servlet.http.HttpServletRequest;
import java.io.IOException;
import java.util.List;
import java.util.Map;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
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

    /**
     * The largest body of a repository request: a few fields, or a model configuration as JSON
     * (kilobytes). Read into memory, so bounded apart from inference bodies' limit.
     */
    static final int MAX_BODY_BYTES = 1 << 20;

    /**
     * What is read and dropped of a body over the limit before the 413 goes out: a client still
     * sending then reads the answer, where a connection closed under it would give it a reset.
     */
    private static final long DRAINED_BYTES = 16L << 20;

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
     * the load's (Triton's Python client sends it without a Content-Type, its C++ client as
     * libcurl's default, {@code application/x-www-form-urlencoded}). The {@code produces} of these
     * mappings is checked before they act: an unload refused 406 unloads nothing.
     */
    @PostMapping(value = "/index", consumes = {MediaType.APPLICATION_JSON_VALUE,
            MediaType.APPLICATION_OCTET_STREAM_VALUE, MediaType.APPLICATION_FORM_URLENCODED_VALUE},
            produces = MediaType.APPLICATION_JSON_VALUE)
    List<Object> index(HttpServletRequest request) {
        return repository.index(TritonExtensions.indexReadyOnly(body(request))).stream()
                .map(r -> r.notLoaded() ? (Object) new NotLoadedEntry(r.name())
                        : new IndexEntry(r.name(), r.version(), r.state(),
                                r.reason() == null ? null : messages.redact(r.reason())))
                .toList();
    }

    /**
     * Body (optional, as Triton's): {@code {"parameters": {"config": "<model configuration JSON>"}}}
     * loads with that configuration mapped onto config.yml ({@link io.etserve.triton.ConfigOverride}).
     * Read as bytes: Triton's clients send the body without a Content-Type (read as octet-stream)
     * or, the C++ client, as libcurl's default form type.
     */
    @PostMapping(value = "/models/{model}/load", consumes = {MediaType.APPLICATION_JSON_VALUE,
            MediaType.APPLICATION_OCTET_STREAM_VALUE, MediaType.APPLICATION_FORM_URLENCODED_VALUE},
            produces = MediaType.APPLICATION_JSON_VALUE)
    Map<String, Object> load(@PathVariable String model, HttpServletRequest request) {
        triton.load(model, TritonExtensions.loadConfig(body(request)));
        return Map.of();
    }

    /** Body (optional, as Triton's): {@code {"parameters": {...}}}; nothing in it changes the unload. */
    @PostMapping(value = "/models/{model}/unload", produces = MediaType.APPLICATION_JSON_VALUE)
    Map<String, Object> unload(@PathVariable String model, HttpServletRequest request) {
        TritonExtensions.checkUnloadBody(body(request));
        repository.unload(model);
        return Map.of();
    }

    /**
     * The request's body, at most {@link #MAX_BODY_BYTES} (413 past it; a body declared far
     * larger is not read at all), not content-coded (415: Triton's clients send these plain).
     */
    static byte[] body(HttpServletRequest request) {
        if (!ContentCoding.isIdentity(request.getHeader("Content-Encoding"))) {
            throw new ApiException(HttpStatus.UNSUPPORTED_MEDIA_TYPE,
                    "a repository request's body is read without a Content-Encoding");
        }
        long declared = request.getContentLengthLong();
        try {
            if (declared > MAX_BODY_BYTES) {
                throw tooLarge(request, declared <= DRAINED_BYTES);
            }
            byte[] body = request.getInputStream().readNBytes(MAX_BODY_BYTES + 1);
            if (body.length > MAX_BODY_BYTES) {
                throw tooLarge(request, true);
            }
            return body;
        } catch (IOException e) {
            throw new ApiException(HttpStatus.BAD_REQUEST, "the request body could not be read: " + e.getMessage());
        }
    }

    /** The 413, once up to {@link #DRAINED_BYTES} more of the body were read when {@code drain}. */
    private static ApiException tooLarge(HttpServletRequest request, boolean drain) throws IOException {
        if (drain) {
            InferBodyFilter.Drain.rest(request.getInputStream(), DRAINED_BYTES);
        }
        return new ApiException(HttpStatus.CONTENT_TOO_LARGE,
                "a repository request's body is at most " + (MAX_BODY_BYTES >> 20) + " MiB");
    }
}
