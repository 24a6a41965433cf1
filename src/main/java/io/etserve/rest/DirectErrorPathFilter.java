package io.etserve.rest;

import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.nio.charset.StandardCharsets;

/**
 * The error page is for the server's own error dispatches. Asked for directly it has no error to
 * describe (Spring answers 500 with status 999), so a direct request gets 404 like any unknown path.
 */
public final class DirectErrorPathFilter implements Filter {

    private static final byte[] BODY = ("{\"type\":\"about:blank\",\"title\":\"Not Found\",\"status\":404,"
            + "\"detail\":\"no such endpoint\"}").getBytes(StandardCharsets.UTF_8);

    @Override
    public void doFilter(ServletRequest request, ServletResponse response, FilterChain chain) throws IOException {
        HttpServletResponse http = (HttpServletResponse) response;
        http.setStatus(HttpServletResponse.SC_NOT_FOUND);
        http.setContentType("application/problem+json");
        http.setContentLength(BODY.length);
        http.getOutputStream().write(BODY);
    }
}
