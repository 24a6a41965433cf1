package io.etserve.rest;

import io.etserve.security.RestrictedApis;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import org.springframework.web.filter.OncePerRequestFilter;

/**
 * Refuses a request to a restricted API group that does not carry its key (403 with the
 * protocol's error body), before its body is read or anything else runs.
 */
public final class RestrictedApiFilter extends OncePerRequestFilter {

    private final RestrictedApis restricted;

    public RestrictedApiFilter(RestrictedApis restricted) {
        this.restricted = restricted;
    }

    @Override
    protected void doFilterInternal(HttpServletRequest request, HttpServletResponse response, FilterChain chain)
            throws ServletException, IOException {
        Optional<RestrictedApis.Group> group = RestrictedApis.Group.ofPath(request.getRequestURI());
        Optional<String> refusal = group.flatMap(g -> restricted.refusal(g,
                restricted.key(g).map(k -> request.getHeader(k.header())).orElse(null)));
        if (refusal.isEmpty()) {
            chain.doFilter(request, response);
            return;
        }
        byte[] body = ("{\"error\":\"" + refusal.get().replace("\"", "\\\"") + "\"}").getBytes(StandardCharsets.UTF_8);
        response.setStatus(HttpServletResponse.SC_FORBIDDEN);
        response.setContentType("application/json");
        response.setContentLength(body.length);
        response.getOutputStream().write(body);
    }
}
