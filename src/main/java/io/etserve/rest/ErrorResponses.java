package io.etserve.rest;

import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import org.springframework.http.HttpHeaders;
import org.springframework.http.MediaType;
import tools.jackson.databind.json.JsonMapper;

/** The protocol's error body written straight to a servlet response (outside Spring MVC). */
final class ErrorResponses {

    private static final JsonMapper JSON = JsonMapper.builder().build();

    private ErrorResponses() {}

    /** {@code {"error": message}} as UTF-8 bytes. */
    static byte[] json(String message) {
        return JSON.writeValueAsBytes(new ProtocolDtos.ErrorBody(message));
    }

    /**
     * @param closeConnection add {@code Connection: close}: the rest of the body was not read,
     *     so the connection cannot carry another request
     */
    static void write(HttpServletResponse response, ApiException e, boolean closeConnection) throws IOException {
        byte[] json = json(e.getMessage());
        response.setStatus(e.status().value());
        response.setContentType(MediaType.APPLICATION_JSON_VALUE);
        if (e.retryAfter() != null) {
            response.setHeader(HttpHeaders.RETRY_AFTER, e.retryAfterHeader());
        }
        if (closeConnection) {
            response.setHeader(HttpHeaders.CONNECTION, "close");
        }
        response.setContentLength(json.length);
        response.getOutputStream().write(json);
    }
}
