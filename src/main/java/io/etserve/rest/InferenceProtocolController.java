package io.etserve.rest;

import io.etserve.execution.InferenceService;
import io.etserve.health.ProbeHealth;
import io.etserve.health.ServerReadiness;
import io.etserve.inference.InflightBytes;
import io.etserve.inference.ModelDescription;
import io.etserve.inference.TensorMetadata;
import io.etserve.metrics.ProtocolMetrics;
import io.etserve.protocol.DecodeLimits;
import io.etserve.protocol.InferRequestDecoder;
import io.etserve.protocol.InferResponseEncoder;
import io.etserve.protocol.PublicMessages;
import io.etserve.repository.ModelRegistry;
import io.etserve.repository.ModelVersionState;
import io.etserve.runtime.DirectBufferPool;
import io.etserve.security.RestrictedApis;
import io.etserve.sharedmemory.SharedMemoryRegions;
import io.etserve.triton.TritonExtensions;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.servlet.HandlerMapping;

/** The Open Inference Protocol (KServe v2) over REST. */
@RestController
@RequestMapping("/v2")
public class InferenceProtocolController {

    static final String JSON = MediaType.APPLICATION_JSON_VALUE;
    static final String OCTET_STREAM = MediaType.APPLICATION_OCTET_STREAM_VALUE;

    private final ModelRegistry registry;
    private final InferenceService inference;
    private final ServerReadiness readiness;
    private final ProbeHealth probes;
    private final long maxRequestBytes;
    private final String version;
    private final InflightBytes inflight;
    private final DirectBufferPool pool;
    private final PublicMessages messages;
    private final InferExchange exchange;
    private final List<String> extensions;

    public InferenceProtocolController(ModelRegistry registry, InferenceService inference, ServerReadiness readiness,
            ProbeHealth probes, InferRequestDecoder decoder, InferResponseEncoder encoder,
            SharedMemoryRegions sharedMemory, DecodeLimits limits, long maxRequestBytes,
            String version, InflightBytes inflight, DirectBufferPool pool, PublicMessages messages,
            ClientConnections clients) {
        this.registry = registry;
        this.inference = inference;
        this.readiness = readiness;
        this.probes = probes;
        this.maxRequestBytes = maxRequestBytes;
        this.version = version;
        this.inflight = inflight;
        this.pool = pool;
        this.messages = messages;
        this.extensions = TritonExtensions.served(sharedMemory.cudaServed());
        this.exchange = new InferExchange(inference, readiness, decoder, encoder, limits, clients,
                new ApiExceptionHandler(messages));
    }

    @GetMapping(value = {"", "/"}, produces = JSON)
    ProtocolDtos.ServerMetadata server() {
        return new ProtocolDtos.ServerMetadata("etserve", version, extensions);
    }

    /** Exactly actuator's liveness answer (see {@link ProbeHealth}); a status alone, so any Accept takes it. */
    @GetMapping("/health/live")
    ResponseEntity<Void> live() {
        return ResponseEntity.status(probes.liveness()).build();
    }

    /** Exactly actuator's readiness answer (see {@link ProbeHealth}). */
    @GetMapping("/health/ready")
    ResponseEntity<Void> ready() {
        return ResponseEntity.status(probes.readiness()).build();
    }

    @GetMapping(value = {"/models/{model}", "/models/{model}/versions/{version}"}, produces = JSON)
    ProtocolDtos.ModelMetadata metadata(@PathVariable String model, @PathVariable(required = false) String version) {
        ModelDescription loaded = registry.describe(model, version);
        return new ProtocolDtos.ModelMetadata(loaded.name(), registry.versions(loaded.name()), "executorch",
                describe(loaded.inputs()), describe(loaded.outputs()));
    }

    @GetMapping(value = {"/models/{model}/ready", "/models/{model}/versions/{version}/ready"}, produces = JSON)
    ResponseEntity<ProtocolDtos.ModelReady> modelReady(@PathVariable String model,
            @PathVariable(required = false) String version) {
        ModelVersionState state = registry.resolve(model, version);
        String reason = state.whyNotServing(inference).or(readiness::whyNotReady).orElse(null);
        boolean ready = reason == null;
        return ResponseEntity.status(ready ? HttpStatus.OK : HttpStatus.SERVICE_UNAVAILABLE)
                .body(new ProtocolDtos.ModelReady(state.name(), ready, messages.redact(reason)));
    }

    /**
     * JSON, or binary with {@code Inference-Header-Content-Length}; a request without a
     * Content-Type (Triton's clients send none) counts as binary, which covers both. Anything
     * else is refused 415, and an Accept that takes neither answer type 406, before the model runs.
     * A body compressed with gzip or deflate ({@code Content-Encoding}, which only this path takes)
     * is inflated first ({@link ContentCoding}); another coding is refused 415 with the
     * {@code Accept-Encoding} it may use.
     */
    @PostMapping(value = {"/models/{model}/infer", "/models/{model}/versions/{version}/infer"},
            consumes = {JSON, OCTET_STREAM}, produces = {JSON, OCTET_STREAM})
    void infer(HttpServletRequest http, HttpServletResponse reply) throws IOException {
        // Read here rather than bound as @PathVariable/@RequestHeader arguments: MVC binds each
        // through a new data binder and type descriptors, a large share of a small request's
        // allocation (bench/results/2026-12-04-2core-serving-cost.md).
        Map<?, ?> path = (Map<?, ?>) http.getAttribute(HandlerMapping.URI_TEMPLATE_VARIABLES_ATTRIBUTE);
        Object read = http.getAttribute(InferBodyFilter.BODY);
        ContentCoding coding;
        try {
            coding = ContentCoding.of(http.getHeader(HttpHeaders.CONTENT_ENCODING));
        } catch (ApiException unsupported) {
            if (read instanceof RequestBody b) {
                b.close();
            }
            reply.setHeader(HttpHeaders.ACCEPT_ENCODING, ContentCoding.ACCEPTED);
            throw unsupported;
        }
        try (RequestBody sent = read instanceof RequestBody b ? b : readBlocking(http);
                RequestBody body = inflated(coding, sent, http)) {
            exchange.serve((String) path.get("model"), (String) path.get("version"), http, reply, body);
        }
    }

    /**
     * A compressed body inflated, the compressed bytes given back at once; the body itself when
     * it came uncompressed. The inflated bytes are held as a body of unknown length: the same
     * size limit (413) and in-flight budget (503) as the bytes sent.
     */
    private RequestBody inflated(ContentCoding coding, RequestBody sent, HttpServletRequest http) {
        if (coding == ContentCoding.IDENTITY) {
            return sent;
        }
        try (sent) {
            RequestBody body = new RequestBody(inflight, pool, maxRequestBytes, -1, RequestBody.headerLength(http));
            try {
                coding.inflate(sent, body);
                return body;
            } catch (RuntimeException e) {
                body.close();
                throw e;
            }
        }
    }

    /**
     * The usual request served through Jetty's core API ({@link InferHandler}), with this
     * controller's exchange, limits and budget.
     */
    public CoreInference core(RestrictedApis restricted, ProtocolMetrics metrics, long maxWholeBytes,
            Duration within, Duration withinAlone) {
        return new CoreInference(exchange, inference, restricted, metrics, inflight, pool, maxRequestBytes,
                maxWholeBytes, within, withinAlone);
    }

    /** The exchange itself, which {@link InferBodyFilter} runs directly for a plain model path. */
    public InferExchange exchange() {
        return exchange;
    }

    /**
     * The body read on this thread: only when {@link InferBodyFilter} did not read it already
     * (a container without async support); same limits and budget.
     */
    private RequestBody readBlocking(HttpServletRequest http) throws IOException {
        RequestBody body = new RequestBody(inflight, pool, maxRequestBytes, http.getContentLengthLong(),
                RequestBody.headerLength(http));
        try (InputStream in = http.getInputStream()) {
            body.readAll(in);
            return body;
        } catch (IOException | RuntimeException e) {
            body.close();
            throw e;
        }
    }

    private static List<ProtocolDtos.TensorMetadata> describe(List<TensorMetadata> tensors) {
        return tensors.stream()
                .map(t -> new ProtocolDtos.TensorMetadata(t.name(), t.dataType().protocolName(), t.shape())).toList();
    }
}
