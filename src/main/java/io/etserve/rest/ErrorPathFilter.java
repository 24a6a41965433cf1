package io.etserve.rest;

import jakarta.servlet.DispatcherType;
import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.RequestDispatcher;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import org.springframework.http.HttpStatus;

/**
 * What the error path answers. Its error dispatches for requests under {@code /v2} (a method
 * the servlet refuses, such as TRACE; anything that ends in {@code sendError}) get the
 * protocol's {@code {"error": ...}} body instead of Spring Boot's {@code {"timestamp", ...}}
 * page; other paths keep that page. Asked for directly it has no error to describe (Spring
 * answers 500 with status 999), so a direct request gets 404 like any unknown path.
 */
public final class ErrorPathFilter implements Filter {

    private static final byte[] NOT_FOUND = ("{\"type\":\"about:blank\",\"title\":\"Not Found\",\"status\":404,"
            + "\"detail\":\"no such endpoint\"}").getBytes(StandardCharsets.UTF_8);

    @Override
    public void doFilter(ServletRequest request, ServletResponse response, FilterChain chain)
            throws IOException, ServletException {
        HttpServletResponse http = (HttpServletResponse) response;
        if (request.getDispatcherType() != DispatcherType.ERROR) {
            http.setStatus(HttpServletResponse.SC_NOT_FOUND);
            http.setContentType("application/problem+json");
            http.setContentLength(NOT_FOUND.length);
            http.getOutputStream().write(NOT_FOUND);
            return;
        }
        Object uri = request.getAttribute(RequestDispatcher.ERROR_REQUEST_URI);
        if (!(uri instanceof String path) || !path.startsWith("/v2")) {
            chain.doFilter(request, response);
            return;
        }
        int code = http.getStatus();
        if (request.getAttribute(RequestDispatcher.ERROR_STATUS_CODE) instanceof Integer status) {
            code = status;
        }
        HttpStatus status = HttpStatus.resolve(code);
        if (status == null) {
            status = HttpStatus.INTERNAL_SERVER_ERROR;
        }
        Object message = request.getAttribute(RequestDispatcher.ERROR_MESSAGE);
        String text = message instanceof String s && !s.isBlank() ? s : status.getReasonPhrase();
        new ApiException(status, text + " (" + path + ")").writeTo(http, false);
    }
}
