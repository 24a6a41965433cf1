package io.etserve.rest;

import io.etserve.inference.InferenceException;
import io.etserve.inference.InferenceFailedException;
import io.etserve.protocol.PublicMessages;
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
 * The protocol fixes its error body: {@code {"error": "..."}} with 400, 404, 503 or 500.
 * Scoped to the protocol controllers; everything else keeps Spring's problem details. Spring
 * MVC's own exceptions (wrong method, media types, a body or header that does not bind) are
 * {@link MvcExceptionHandler}'s, which comes first. Every other failure is classified by
 * {@link InferenceException#of} and answered by one switch over its kind (grpc/GrpcStatuses
 * holds gRPC's).
 */
@RestControllerAdvice(assignableTypes = {InferenceProtocolController.class, RepositoryController.class,
        TritonExtensionsController.class})
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

    /** The REST layer's own refusals (body size, body timeout, readiness), with their status. */
    @ExceptionHandler(ApiException.class)
    ResponseEntity<ProtocolDtos.ErrorBody> api(ApiException e) {
        return answer(e.status().value(), e.getMessage(), e.retryAfter());
    }

    /** The client went away or sent a broken body: nothing the server did wrong. */
    @ExceptionHandler(IOException.class)
    ResponseEntity<ProtocolDtos.ErrorBody> io(IOException e) {
        log.debug("request body could not be read: {}", e.getMessage());
        return answer(HttpStatus.BAD_REQUEST.value(), "cannot read the request body: " + e.getMessage(), null);
    }

    @ExceptionHandler(Exception.class)
    ResponseEntity<ProtocolDtos.ErrorBody> failed(Exception e) {
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

    private ResponseEntity<ProtocolDtos.ErrorBody> answer(int status, String message, Duration retryAfter) {
        ResponseEntity.BodyBuilder b = ResponseEntity.status(status).contentType(MediaType.APPLICATION_JSON);
        if (retryAfter != null) {
            b.header(HttpHeaders.RETRY_AFTER, ApiException.retryAfterHeader(retryAfter));
        }
        String text = message != null ? messages.redact(message) : ApiException.reasonPhrase(status);
        return b.body(new ProtocolDtos.ErrorBody(text));
    }
}
