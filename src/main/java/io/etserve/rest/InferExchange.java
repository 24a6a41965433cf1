package io.etserve.rest;

import io.etserve.execution.InferenceService;
import io.etserve.health.ServerReadiness;
import io.etserve.inference.Caller;
import io.etserve.inference.InferenceRequest;
import io.etserve.inference.InferenceResponse;
import io.etserve.inference.ModelNames;
import io.etserve.protocol.DecodeLimits;
import io.etserve.protocol.EncodedResponse;
import io.etserve.protocol.InferRequestDecoder;
import io.etserve.protocol.InferResponseEncoder;
import jakarta.servlet.ServletOutputStream;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.ServletResponseWrapper;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.nio.channels.SocketChannel;
import java.nio.charset.Charset;
import java.time.Duration;
import java.util.Locale;
import java.util.function.Supplier;
import org.springframework.http.HttpStatus;

/**
 * One REST inference exchange: the body (already read), decoded, run, encoded and written.
 *
 * <p>A POST to a plain model (and version) path whose Content-Type and Accept the protocol's
 * answers fit ({@link #directTarget}) is served here directly: by {@link CoreInference} through
 * Jetty's core API when its whole body came with its head, else by {@link InferBodyFilter}
 * without Spring MVC's dispatch. Everything else (odd paths, media types the endpoint refuses, other
 * methods) goes on to {@link InferenceProtocolController}, whose mapping answers it exactly as
 * before, and which runs this same exchange for what it accepts. Failures on the direct path are
 * answered by {@link ApiExceptionHandler}'s own mapping, so both paths speak alike.
 */
public final class InferExchange {

    static final String HEADER_LENGTH = "Inference-Header-Content-Length";

    // The request's path as the direct path serves it (target()): plain names only, the rest via MVC.
    private static final String MODELS = "/v2/models/";
    private static final String VERSIONS = "/versions/";
    private static final String INFER = "/infer";

    private final InferenceService inference;
    private final ServerReadiness readiness;
    private final InferRequestDecoder decoder;
    private final InferResponseEncoder encoder;
    private final DecodeLimits limits;
    private final ClientConnections clients;
    private final ApiExceptionHandler errors;

    InferExchange(InferenceService inference, ServerReadiness readiness, InferRequestDecoder decoder,
            InferResponseEncoder encoder, DecodeLimits limits, ClientConnections clients, ApiExceptionHandler errors) {
        this.inference = inference;
        this.readiness = readiness;
        this.decoder = decoder;
        this.encoder = encoder;
        this.limits = limits;
        this.clients = clients;
        this.errors = errors;
    }

    /** How this exchange answers a failure (both paths answer alike). */
    ApiExceptionHandler errors() {
        return errors;
    }

    /** The model and version a request names. */
    record Target(String model, String version) {}

    /**
     * The target of a request the direct path serves, or null when Spring MVC's mapping should
     * take it (its 404, 405, 406 and 415 stay what they were).
     */
    static Target directTarget(HttpServletRequest http) {
        return directTarget(http.getMethod(), http.getRequestURI(), http.getContentType(), http.getHeader("Accept"),
                http.getHeader("Content-Encoding"));
    }

    /**
     * As {@link #directTarget(HttpServletRequest)}, from the request's method, raw path, media-type
     * headers and Content-Encoding (a compressed body goes to Spring MVC's path, which inflates it).
     */
    static Target directTarget(String method, String path, String contentType, String accept, String contentEncoding) {
        if (!"POST".equals(method)) {
            return null;
        }
        // The path first: it is the cheap test, and it keeps the media-type parsing (which a
        // selector thread runs) to inference requests.
        Target target = target(path);
        return target != null && fits(contentType, false) && fits(accept, true)
                && ContentCoding.isIdentity(contentEncoding) ? target : null;
    }

    /**
     * {@code /v2/models/{model}[/versions/{digits}]/infer}, the model {@code [A-Za-z0-9][A-Za-z0-9._-]*}
     * (its other rules are the registry's), or null for any other path. By hand: it runs for
     * every request.
     */
    static Target target(String path) {
        if (path == null || !path.startsWith(MODELS) || !path.endsWith(INFER)) {
            return null;
        }
        int start = MODELS.length();
        int end = path.length() - INFER.length();
        int i = start;
        if (i >= end || !ModelNames.isAlphanumeric(path.charAt(i))) {
            return null;
        }
        while (i < end && ModelNames.isNameChar(path.charAt(i))) {
            i++;
        }
        String model = path.substring(start, i);
        if (i == end) {
            return new Target(model, null);
        }
        if (!path.startsWith(VERSIONS, i) || i + VERSIONS.length() >= end) {
            return null;
        }
        for (int d = i + VERSIONS.length(); d < end; d++) {
            if (!ModelNames.isDigit(path.charAt(d))) {
                return null;
            }
        }
        return new Target(model, path.substring(i + VERSIONS.length(), end));
    }

    /**
     * Whether a Content-Type (one value) or an Accept (a list) plainly takes JSON or
     * octet-stream: absent, or naming either, or (Accept) a wildcard over them, with no parameter
     * but a supported charset (Content-Type) or a non-zero q (Accept). Anything else is left to
     * MVC, whose refusals (415, 406) stay as they are.
     */
    private static boolean fits(String header, boolean list) {
        if (header == null || header.isBlank() || header.equals("application/octet-stream")
                || header.equals("application/json")) {
            return true;  // the usual request, without splitting it
        }
        for (String range : list ? header.split(",") : new String[] {header}) {
            String[] parts = range.toLowerCase(Locale.ROOT).split(";", -1);  // ";" alone: two empty parts
            for (int i = 1; i < parts.length; i++) {
                if (!plainParameter(parts[i].strip(), list)) {
                    return false;
                }
            }
            String type = parts[0].strip();
            if (type.equals("application/json") || type.equals("application/octet-stream")
                    || list && (type.equals("*/*") || type.equals("application/*"))) {
                return true;
            }
        }
        return false;
    }

    /**
     * Whether {@code s} from {@code from} on is a weight above zero: {@code 1}, {@code 1.}
     * followed by zeros, or {@code 0.} followed by digits not all zero. By hand: a regular
     * expression for it backtracks quadratically over a long run of digits, and this runs for
     * every inference request, on the selector too.
     */
    static boolean nonZeroWeight(String s, int from) {
        int n = s.length();
        if (from >= n) {
            return false;
        }
        char lead = s.charAt(from);
        if (lead != '0' && lead != '1') {
            return false;
        }
        if (from + 1 == n) {
            return lead == '1';
        }
        if (s.charAt(from + 1) != '.') {
            return false;
        }
        boolean nonZero = false;
        for (int i = from + 2; i < n; i++) {
            char c = s.charAt(i);
            if (c < '0' || c > '9' || lead == '1' && c != '0') {
                return false;
            }
            nonZero |= c != '0';
        }
        return lead == '1' || nonZero;
    }

    private static boolean plainParameter(String param, boolean accept) {
        if (accept) {
            return param.startsWith("q=") && nonZeroWeight(param, 2);
        }
        if (!param.startsWith("charset=")) {
            return false;
        }
        try {
            return Charset.isSupported(param.substring("charset=".length()).replace("\"", ""));
        } catch (IllegalArgumentException e) {
            return false;
        }
    }

    /** The direct path: the exchange, with any failure answered here in the protocol's error body. */
    void serveDirect(Target target, HttpServletRequest http, HttpServletResponse reply, RequestBody body)
            throws IOException {
        try {
            serve(target.model(), target.version(), http, reply, body);
        } catch (Exception e) {
            if (reply.isCommitted()) {
                throw e instanceof IOException io ? io : new IOException(e);
            }
            // Not reset(): headers set before this exchange (a trace's traceparent) stay.
            reply.resetBuffer();
            reply.setHeader(HEADER_LENGTH, null);
            errors.write(reply, e);
        }
    }

    /**
     * Runs the request in {@code body} and writes the answer; throws what failed. The body owns
     * every tensor buffer of this exchange (inputs in place, outputs written from where the
     * bridge put them) until the response is written.
     */
    void serve(String model, String version, HttpServletRequest http, HttpServletResponse reply, RequestBody body)
            throws IOException {
        // A client that closes its connection while the request waits for an instance or a
        // batch has it dropped (ClientConnections); the answer then goes nowhere. Its timeout
        // counts from here, once the whole body has come, as Triton counts from its queue.
        EncodedResponse encoded = answer(model, version, headerLength(http.getHeader(HEADER_LENGTH)), body,
                clients.caller(http), System.nanoTime());
        reply.setStatus(HttpServletResponse.SC_OK);
        reply.setContentType(encoded.contentType());
        encoded.inferenceHeaderContentLength().ifPresent(n -> reply.setHeader(HEADER_LENGTH, Integer.toString(n)));
        reply.setContentLengthLong(encoded.contentLength());
        encoded.writeTo(containerStream(reply));
    }

    /**
     * The answer to the request in {@code body} on the servlet path ({@link CoreInference} calls
     * {@link #decode} and {@link #run} itself); throws what failed.
     *
     * @param headerLength {@code Inference-Header-Content-Length}, or null when absent
     * @param arrivedNanos when the request came ({@code System.nanoTime()}), kept by a second attempt
     */
    EncodedResponse answer(String model, String version, Integer headerLength, RequestBody body, Caller caller,
            long arrivedNanos) {
        return run(model, version, decode(headerLength, body), body, caller, arrivedNanos);
    }

    /**
     * The request in {@code body} (its tensors in the body's buffers); throws 503 while the
     * server takes no requests, or what the request got wrong.
     *
     * @param headerLength {@code Inference-Header-Content-Length}, or null when absent
     */
    InferenceRequest decode(Integer headerLength, RequestBody body) {
        var refused = readiness.whyNotAccepting();
        if (refused.isPresent()) {
            // Shutting down or not yet started: another replica (or this one, soon) can take it.
            throw new ApiException(HttpStatus.SERVICE_UNAVAILABLE, "server is not ready: " + refused.get(),
                    Duration.ofSeconds(1));
        }
        return decoder.decode(body.json(), body.jsonLength(), headerLength, body.binary(), limits, body::tensorBuffer,
                body::sharedMemoryBuffer);
    }

    /**
     * Runs a {@link #decode decoded} request (the call itself writes the outputs it asks for in
     * shared memory) and encodes its answer; throws what failed.
     */
    EncodedResponse run(String model, String version, InferenceRequest request, RequestBody body, Caller caller,
            long arrivedNanos) {
        InferenceResponse response = inference.infer(model, version, request, body, caller, arrivedNanos);
        try (var span = inference.spans().encode(response.modelName(), "rest")) {
            return encoder.encode(response);
        }
    }

    /** The client on the connection {@code channel} gives, watched while its request waits ({@link ClientConnections}). */
    Caller caller(Supplier<SocketChannel> channel) {
        return clients.caller(channel);
    }

    /**
     * {@code Inference-Header-Content-Length}, or null when absent; 400 when not a number, or a
     * number no body could hold (the body's own bounds are checked where it is read).
     */
    static Integer headerLength(String value) {
        if (value == null) {
            return null;
        }
        String shown = value.substring(0, Math.min(value.length(), 40));
        String digits = value.trim();
        try {
            return Integer.valueOf(digits);
        } catch (NumberFormatException e) {
            throw new ApiException(HttpStatus.BAD_REQUEST, HEADER_LENGTH + (digits.matches("\\d+")
                    ? " is larger than any request body: '" : " is not a number: '") + shown + "'");
        }
    }

    /**
     * The container's own output stream, under any wrappers: Spring MVC wraps the response of
     * every async-capable request, and its stream writes a ByteBuffer through a new array of the
     * buffer's size (the Servlet API's default), where Jetty's writes the direct buffer as is.
     */
    private static ServletOutputStream containerStream(HttpServletResponse reply) throws IOException {
        ServletResponse r = reply;
        while (r instanceof ServletResponseWrapper wrapper) {
            r = wrapper.getResponse();
        }
        return r.getOutputStream();
    }
}
