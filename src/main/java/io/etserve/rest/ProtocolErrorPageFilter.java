package io.etserve.rest;

import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.RequestDispatcher;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import org.springframework.http.HttpStatus;

/**
 * Error dispatches for requests under {@code /v2} (a method the servlet refuses, such as TRACE;
 * anything that ends in {@code sendError}) answer with the protocol's {@code {"error": ...}}
 * body instead of Spring Boot's {@code {"timestamp", ...}} page. Other paths keep that page.
 */
public final class ProtocolErrorPageFilter implements Filter {

    @Override
    public void doFilter(ServletRequest request, ServletResponse response, FilterChain chain)
            throws IOException, ServletException {
        Object uri = request.getAttribute(RequestDispatcher.ERROR_REQUEST_URI);
        if (!(uri instanceof String path) || !path.startsWith("/v2")) {
            chain.doFilter(request, response);
            return;
        }
        HttpServletResponse http = (HttpServletResponse) response;
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
        ErrorResponses.write(http, new ApiException(status, text + " (" + path + ")"), false);
    }
}
