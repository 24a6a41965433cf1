package io.etserve.api;

import jakarta.servlet.http.HttpServletRequest;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.Order;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.ProblemDetail;
import org.springframework.http.ResponseEntity;
import org.springframework.web.HttpRequestMethodNotSupportedException;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.RestControllerAdvice;
import org.springframework.web.servlet.resource.NoResourceFoundException;

/**
 * Errors raised before a handler is chosen (wrong method, unknown path). Under {@code /v2} the
 * protocol fixes the body ({@code {"error": ...}}); elsewhere they stay RFC 9457 problem details.
 */
@RestControllerAdvice
@Order(Ordered.HIGHEST_PRECEDENCE)
class ProtocolFallbackAdvice {

    @ExceptionHandler({HttpRequestMethodNotSupportedException.class, NoResourceFoundException.class})
    ResponseEntity<?> unrouted(Exception e, HttpServletRequest request) {
        HttpStatus status = e instanceof HttpRequestMethodNotSupportedException ? HttpStatus.METHOD_NOT_ALLOWED
                : HttpStatus.NOT_FOUND;
        String message = status == HttpStatus.METHOD_NOT_ALLOWED
                ? request.getMethod() + " is not supported on " + request.getRequestURI()
                : "no such endpoint: " + request.getRequestURI();
        if (request.getRequestURI().startsWith("/v2")) {
            return ResponseEntity.status(status).contentType(MediaType.APPLICATION_JSON)
                    .body(new ProtocolDtos.ErrorBody(message));
        }
        return ResponseEntity.status(status).body(ProblemDetail.forStatusAndDetail(status, message));
    }
}
