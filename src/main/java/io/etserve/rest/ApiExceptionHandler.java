package io.etserve.rest;

import io.etserve.inference.InvalidInputException;
import io.etserve.inference.ModelNotFoundException;
import io.etserve.inference.ModelUnavailableException;
import io.etserve.inference.OverloadedException;
import io.etserve.inference.RequestCancelledException;
import io.etserve.protocol.InvalidRequestException;
import io.etserve.protocol.PublicMessages;
import io.etserve.runtime.ExecuTorchException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
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
 * {@link MvcExceptionHandler}'s, which comes first: what reaches the catch-all here is the
 * server's failure.
 */
@RestControllerAdvice(assignableTypes = {InferenceProtocolController.class, RepositoryController.class,
        TritonExtensionsController.class})
// After MvcExceptionHandler (HIGHEST_PRECEDENCE), whose exceptions the catch-all must not take.
@org.springframework.core.annotation.Order(org.springframework.core.Ordered.HIGHEST_PRECEDENCE + 1)
class ApiExceptionHandler {

    private static final Logger log = LoggerFactory.getLogger(ApiExceptionHandler.class);

    /** nginx's status for a request whose client closed the connection before the answer. */
    static final int CLIENT_CLOSED_REQUEST = 499;

    private final PublicMessages messages;

    ApiExceptionHandler(PublicMessages messages) {
        this.messages = messages;
    }

    @ExceptionHandler(ApiException.class)
    ResponseEntity<ProtocolDtos.ErrorBody> api(ApiException e) {
        ResponseEntity.BodyBuilder b = ResponseEntity.status(e.status()).contentType(MediaType.APPLICATION_JSON);
        if (e.retryAfter() != null) {
            b.header(HttpHeaders.RETRY_AFTER, e.retryAfterHeader());
        }
        return b.body(new ProtocolDtos.ErrorBody(messages.redact(e.getMessage())));
    }

    @ExceptionHandler({InvalidRequestException.class, InvalidInputException.class,
            io.etserve.repository.RepositoryControl.RefusedException.class})
    ResponseEntity<ProtocolDtos.ErrorBody> badRequest(Exception e) {
        return error(HttpStatus.BAD_REQUEST, e.getMessage());
    }

    @ExceptionHandler(ModelNotFoundException.class)
    ResponseEntity<ProtocolDtos.ErrorBody> notFound(ModelNotFoundException e) {
        return error(HttpStatus.NOT_FOUND, e.getMessage());
    }

    @ExceptionHandler(ModelUnavailableException.class)
    ResponseEntity<ProtocolDtos.ErrorBody> unavailable(ModelUnavailableException e) {
        return api(new ApiException(HttpStatus.SERVICE_UNAVAILABLE, e.getMessage(), e.retryAfter()));
    }

    @ExceptionHandler(OverloadedException.class)
    ResponseEntity<ProtocolDtos.ErrorBody> overloaded(OverloadedException e) {
        return api(new ApiException(HttpStatus.SERVICE_UNAVAILABLE, e.getMessage(), e.retryAfter()));
    }

    /**
     * A request dropped before it ran. Its timeout expired: 503, as Triton answers "Request
     * timeout expired" (no Retry-After: the client set the limit). Its client went away: 499
     * (nginx's "client closed request"), which nobody reads but the access log and the request
     * metrics show.
     */
    @ExceptionHandler(RequestCancelledException.class)
    ResponseEntity<ProtocolDtos.ErrorBody> cancelled(RequestCancelledException e) {
        int status = switch (e.reason()) {
            case TIMEOUT -> HttpStatus.SERVICE_UNAVAILABLE.value();
            case DEADLINE -> HttpStatus.GATEWAY_TIMEOUT.value();
            case CLIENT -> CLIENT_CLOSED_REQUEST;
        };
        return ResponseEntity.status(status).contentType(MediaType.APPLICATION_JSON)
                .body(new ProtocolDtos.ErrorBody(messages.redact(e.getMessage())));
    }

    @ExceptionHandler(ExecuTorchException.class)
    ResponseEntity<ProtocolDtos.ErrorBody> runtime(ExecuTorchException e) {
        log.warn("inference failed in the runtime: {}", e.getMessage());
        return error(HttpStatus.INTERNAL_SERVER_ERROR, "inference failed: " + e.getMessage());
    }

    /** The client went away or sent a broken body: nothing the server did wrong. */
    @ExceptionHandler(java.io.IOException.class)
    ResponseEntity<ProtocolDtos.ErrorBody> io(java.io.IOException e) {
        log.debug("request body could not be read: {}", e.getMessage());
        return error(HttpStatus.BAD_REQUEST, "cannot read the request body: " + e.getMessage());
    }

    @ExceptionHandler(Exception.class)
    ResponseEntity<ProtocolDtos.ErrorBody> internal(Exception e) {
        log.error("unexpected failure", e);
        return error(HttpStatus.INTERNAL_SERVER_ERROR, "internal error: " + e.getClass().getSimpleName());
    }

    private ResponseEntity<ProtocolDtos.ErrorBody> error(HttpStatus status, String message) {
        return ResponseEntity.status(status).contentType(MediaType.APPLICATION_JSON)
                .body(new ProtocolDtos.ErrorBody(message == null ? status.getReasonPhrase() : messages.redact(message)));
    }
}
