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
 * {@code .../infer;x} reaches inference unseen by the body filter and the metrics. So a path
 * under {@code /v2} with a {@code ;}, or with an escape of a character that needs none (a letter,
 * a digit, {@code -._~}, or {@code /}), is refused 400 here, first: no client of the protocol
 * sends either. Other escapes (a model name in another script, which the repository then does not
 * know) can spell none of the protocol's words and pass.
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
        if (disguised(path)) {
            write(response, HttpServletResponse.SC_BAD_REQUEST, "the path must not contain ';' or escape a letter,"
                    + " a digit, '-', '.', '_', '~' or '/': the protocol's paths need neither");
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

    /** A {@code ;}, or a {@code %XX} of an unreserved character or {@code /}: a path that routes other than it reads. */
    static boolean disguised(String path) {
        for (int i = 0; i < path.length(); i++) {
            char c = path.charAt(i);
            if (c == ';') {
                return true;
            }
            if (c == '%' && i + 2 < path.length()) {
                int hi = Character.digit(path.charAt(i + 1), 16);
                int lo = Character.digit(path.charAt(i + 2), 16);
                if (hi >= 0 && lo >= 0) {
                    char decoded = (char) (hi * 16 + lo);
                    if (decoded < 0x80 && (Character.isLetterOrDigit(decoded) || "-._~/".indexOf(decoded) >= 0)) {
                        return true;
                    }
                }
            }
        }
        return false;
    }

    private static void write(HttpServletResponse response, int status, String error) throws IOException {
        byte[] body = ("{\"error\":\"" + error.replace("\"", "\\\"") + "\"}").getBytes(StandardCharsets.UTF_8);
        response.setStatus(status);
        response.setContentType("application/json");
        response.setContentLength(body.length);
        response.getOutputStream().write(body);
    }
}
