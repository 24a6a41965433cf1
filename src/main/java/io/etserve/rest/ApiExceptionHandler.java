package io.etserve.rest;

import io.etserve.inference.InferenceException;
import io.etserve.inference.InferenceFailedException;
import io.etserve.protocol.ErrorBody;
import io.etserve.protocol.PublicMessages;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.time.Duration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.Order;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.RestControllerAdvice;

/**
 * The protocol fixes its error body: {@code {"error": "..."}}, whatever the status (400, 404,
 * 408, 413, 499, 500, 503, 504).
 * Scoped to the protocol controllers; everything else keeps Spring's problem details. Spring
 * MVC's own exceptions (wrong method, media types, a body or header that does not bind) are
 * {@link MvcExceptionHandler}'s, which comes first. Every other failure is classified by
 * {@link InferenceException#of} and answered by one switch over its kind (grpc/GrpcStatuses
 * holds gRPC's).
 */
@RestControllerAdvice(assignableTypes = {InferenceProtocolController.class, RepositoryController.class,
        TritonExtensionsController.class, SharedMemoryController.class})
// After MvcExceptionHandler (HIGHEST_PRECEDENCE), whose exceptions the catch-all must not take.
@Order(Ordered.HIGHEST_PRECEDENCE + 1)
class ApiExceptionHandler {

    private static final Logger log = LoggerFactory.getLogger(ApiExceptionHandler.class);

    /** nginx's status for a request whose client closed the connection before the answer. */
    static final int CLIENT_CLOSED_REQUEST = 499;

    private final PublicMessages messages;

    ApiExceptionHandler(PublicMessages messages) {
        this.messages = messages;
    }

    /**
     * Every failure of a protocol request: the REST layer's own refusals (body size, body
     * timeout, readiness) with their status; a body the client broke off or garbled, 400; the
     * rest by kind.
     */
    @ExceptionHandler(Exception.class)
    ResponseEntity<ProtocolDtos.ErrorBody> answer(Exception e) {
        Answer a = answerOf(e);
        ResponseEntity.BodyBuilder b = ResponseEntity.status(a.status()).contentType(MediaType.APPLICATION_JSON);
        if (a.retryAfter() != null) {
            b.header(HttpHeaders.RETRY_AFTER, ApiException.retryAfterHeader(a.retryAfter()));
        }
        return b.body(new ProtocolDtos.ErrorBody(a.text()));
    }

    /** The same answer written straight to the servlet response (the direct inference path). */
    void write(HttpServletResponse response, Throwable e) throws IOException {
        Answer a = answerOf(e);
        ApiException.write(response, a.status(), a.text(), a.retryAfter(), false);
    }

    /** A failure's status, the body's message (redacted of the server's paths) and Retry-After. */
    record Answer(int status, String text, Duration retryAfter) {}

    Answer answerOf(Throwable e) {
        if (e instanceof ApiException api) {
            return answer(api.status().value(), api.getMessage(), api.retryAfter());
        }
        if (e instanceof IOException io) {
            log.debug("request body could not be read: {}", io.getMessage());
            return answer(HttpStatus.BAD_REQUEST.value(), "cannot read the request body: " + io.getMessage(), null);
        }
        InferenceException failure = InferenceException.of(e);
        if (failure instanceof InferenceFailedException f) {
            f.log(log);
        }
        return answer(status(failure.kind()), failure.getMessage(), failure.retryAfter());
    }

    /**
     * The status of each kind. A request dropped before it ran: its {@code timeout} parameter
     * expired, 503, as Triton answers "Request timeout expired" (no Retry-After: the client set
     * the limit); its client went away, 499 (nginx's "client closed request"), which nobody reads
     * but the access log and the request metrics show.
     */
    static int status(InferenceException.Kind kind) {
        return switch (kind) {
            case INVALID_INPUT -> HttpStatus.BAD_REQUEST.value();
            case NOT_FOUND -> HttpStatus.NOT_FOUND.value();
            case UNAVAILABLE, OVERLOADED, TIMED_OUT -> HttpStatus.SERVICE_UNAVAILABLE.value();
            case DEADLINE_EXCEEDED -> HttpStatus.GATEWAY_TIMEOUT.value();
            case CLIENT_GONE -> CLIENT_CLOSED_REQUEST;
            case FAILED -> HttpStatus.INTERNAL_SERVER_ERROR.value();
        };
    }

    private Answer answer(int status, String message, Duration retryAfter) {
        return new Answer(status, message != null ? messages.redact(message) : ApiException.reasonPhrase(status),
                retryAfter);
    }
}
