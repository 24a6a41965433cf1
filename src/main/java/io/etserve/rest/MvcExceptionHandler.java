package io.etserve.rest;

import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.core.NestedExceptionUtils;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.Order;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatusCode;
import org.springframework.http.MediaType;
import org.springframework.http.ProblemDetail;
import org.springframework.http.ResponseEntity;
import org.springframework.http.converter.HttpMessageNotReadableException;
import org.springframework.web.HttpMediaTypeNotAcceptableException;
import org.springframework.web.HttpMediaTypeNotSupportedException;
import org.springframework.web.HttpRequestMethodNotSupportedException;
import org.springframework.web.bind.annotation.RestControllerAdvice;
import org.springframework.web.context.request.ServletWebRequest;
import org.springframework.web.context.request.WebRequest;
import org.springframework.web.servlet.NoHandlerFoundException;
import org.springframework.web.servlet.mvc.method.annotation.ResponseEntityExceptionHandler;
import org.springframework.web.servlet.resource.NoResourceFoundException;

/**
 * Spring MVC's own exceptions, on every path: what a client gets wrong about HTTP itself (a
 * method the path does not serve, a body type it does not read, an {@code Accept} it cannot
 * answer, a body that does not parse, an unknown path, a header that does not bind) answers its
 * 4xx with the headers HTTP asks for ({@code Allow} on 405, {@code Accept} on 415). Spring's
 * {@link ResponseEntityExceptionHandler} classifies them (status, headers); under {@code /v2}
 * the protocol fixes the body ({@code {"error": ...}}), elsewhere they stay RFC 9457 problem
 * details. Being a {@code ResponseEntityExceptionHandler}, this replaces Spring Boot's
 * problem-details handler, so these exceptions have this one owner; the service's own
 * exceptions are {@link ApiExceptionHandler}'s. A client's mistake is logged at DEBUG, never as
 * a server failure.
 */
@RestControllerAdvice
// Before ApiExceptionHandler, whose catch-all would otherwise answer these 500.
@Order(Ordered.HIGHEST_PRECEDENCE)
class MvcExceptionHandler extends ResponseEntityExceptionHandler {

    private static final Logger log = LoggerFactory.getLogger(MvcExceptionHandler.class);

    /** As the base class, without its WARN per request: a wrong method is the client's mistake. */
    @Override
    protected ResponseEntity<Object> handleHttpRequestMethodNotSupported(HttpRequestMethodNotSupportedException ex,
            HttpHeaders headers, HttpStatusCode status, WebRequest request) {
        return handleExceptionInternal(ex, null, headers, status, request);
    }

    @Override
    protected ResponseEntity<Object> handleExceptionInternal(Exception ex, Object body, HttpHeaders headers,
            HttpStatusCode status, WebRequest request) {
        HttpServletRequest http = request instanceof ServletWebRequest servlet ? servlet.getRequest() : null;
        String where = http == null ? "" : http.getMethod() + " " + http.getRequestURI();
        if (status.is5xxServerError()) {
            log.error("{} failed: {}", where, ex.toString(), ex);
        } else {
            log.debug("{} refused with {}: {}", where, status.value(), ex.toString());
        }
        if (http == null || !http.getRequestURI().startsWith("/v2")) {
            ResponseEntity<Object> problem = super.handleExceptionInternal(ex, body, headers, status, request);
            if (http != null && problem != null && problem.getBody() instanceof ProblemDetail detail) {
                detail.setDetail(message(ex, detail, http));
            }
            return problem;
        }
        HttpServletResponse response = ((ServletWebRequest) request).getResponse();
        if (response != null && response.isCommitted()) {
            return null;  // too late to answer; the base class does the same
        }
        // A preset Content-Type: the body is written as JSON whatever the Accept header asked
        // (a 406 has to reach the client that sent the Accept it refuses).
        return ResponseEntity.status(status).headers(headers).contentType(MediaType.APPLICATION_JSON)
                .body(new ProtocolDtos.ErrorBody(message(ex, body, http)));
    }

    /** What the client did wrong, in the words of the protocol's other errors. */
    private static String message(Exception ex, Object body, HttpServletRequest request) {
        String on = " on " + request.getMethod() + " " + request.getRequestURI();
        if (ex instanceof HttpRequestMethodNotSupportedException e) {
            String allowed = e.getSupportedHttpMethods() == null ? ""
                    : " (allowed: " + e.getSupportedHttpMethods().stream().map(Object::toString)
                            .collect(Collectors.joining(", ")) + ")";
            return request.getMethod() + " is not supported on " + request.getRequestURI() + allowed;
        }
        if (ex instanceof NoResourceFoundException || ex instanceof NoHandlerFoundException) {
            return "no such endpoint: " + request.getRequestURI();
        }
        if (ex instanceof HttpMediaTypeNotSupportedException e) {
            return "Content-Type " + (e.getContentType() == null ? "'" + request.getContentType() + "'"
                    : "'" + e.getContentType() + "'") + " is not supported" + on + "; send "
                    + MediaType.toString(e.getSupportedMediaTypes());
        }
        if (ex instanceof HttpMediaTypeNotAcceptableException e) {
            return "cannot answer in any type of Accept: " + request.getHeader(HttpHeaders.ACCEPT) + on
                    + (e.getSupportedMediaTypes().isEmpty() ? "" : "; it answers " + MediaType.toString(e.getSupportedMediaTypes()));
        }
        if (ex instanceof HttpMessageNotReadableException e) {
            Throwable cause = NestedExceptionUtils.getMostSpecificCause(e);
            String why = cause.getMessage() == null ? cause.getClass().getSimpleName() : cause.getMessage();
            return "malformed request body: " + why.lines().findFirst().orElse(why);
        }
        if (body instanceof ProblemDetail problem && problem.getDetail() != null) {
            return problem.getDetail();
        }
        return ex.getMessage() != null ? ex.getMessage() : ex.getClass().getSimpleName();
    }
}
