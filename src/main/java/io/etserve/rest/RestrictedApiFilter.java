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
 *
 * <p>Every filter here reads the path as sent, while Spring MVC routes on the path decoded and
 * with {@code ;parameters} dropped: {@code /v2/repository;x/index} or {@code /v2/%72epository/index}
 * reach the repository controller yet name no restricted group, and
 * {@code .../infer;x} reaches inference unseen by the body filter and the metrics. No path of the
 * protocol needs either (model names are letters, digits, {@code .}, {@code _} and {@code -}), so
 * a path under {@code /v2} with a {@code ;} or a {@code %} is refused 400 here, first.
 */
public final class RestrictedApiFilter extends OncePerRequestFilter {

    private final RestrictedApis restricted;

    public RestrictedApiFilter(RestrictedApis restricted) {
        this.restricted = restricted;
    }

    @Override
    protected void doFilterInternal(HttpServletRequest request, HttpServletResponse response, FilterChain chain)
            throws ServletException, IOException {
        String path = request.getRequestURI();
        if (path.indexOf(';') >= 0 || path.indexOf('%') >= 0) {
            write(response, HttpServletResponse.SC_BAD_REQUEST, "the path must not contain ';' or '%': model names,"
                    + " versions and the protocol's paths need neither");
            return;
        }
        Optional<RestrictedApis.Group> group = RestrictedApis.Group.ofPath(path);
        Optional<String> refusal = group.flatMap(g -> restricted.refusal(g,
                restricted.key(g).map(k -> request.getHeader(k.header())).orElse(null)));
        if (refusal.isEmpty()) {
            chain.doFilter(request, response);
            return;
        }
        write(response, HttpServletResponse.SC_FORBIDDEN, refusal.get());
    }

    private static void write(HttpServletResponse response, int status, String error) throws IOException {
        byte[] body = ("{\"error\":\"" + error.replace("\"", "\\\"") + "\"}").getBytes(StandardCharsets.UTF_8);
        response.setStatus(status);
        response.setContentType("application/json");
        response.setContentLength(body.length);
        response.getOutputStream().write(body);
    }
}
