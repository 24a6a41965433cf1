package io.etserve.rest;

import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import org.springframework.web.filter.OncePerRequestFilter;

/**
 * Reads and discards what a request left unread of its body once it is answered (up to
 * {@link #MAX_DISCARDED} bytes), so that its connection carries the client's next request. Jetty
 * closes a connection whose request left body bytes it could not consume at once, without
 * {@code Connection: close}: a client that sent the body after the head (Java's HttpClient may;
 * any client with a body larger than a packet does) and then its next request on that connection
 * loses the next one. Every refusal before the body is read did so: an unknown path, a method
 * or media type not served, a restricted API without its key, a registration while shared memory
 * is off. The first filter on the public port, for requests answered on their own thread; an
 * asynchronous request (the servlet path's {@code /infer}) reads or drains its own body
 * ({@link InferBodyFilter}).
 */
public final class UnreadBodyFilter extends OncePerRequestFilter {

    /** Most bytes read and thrown away; past them the connection closes, as before. */
    static final long MAX_DISCARDED = 16L << 20;

    @Override
    protected void doFilterInternal(HttpServletRequest request, HttpServletResponse response, FilterChain chain)
            throws ServletException, IOException {
        try {
            chain.doFilter(request, response);
        } finally {
            if (!request.isAsyncStarted() && worthReading(request)) {
                discard(request);
            }
        }
    }

    /** A body that may still have bytes: declared within the limit (one declared past it is not read), or chunked. */
    private static boolean worthReading(HttpServletRequest request) {
        long declared = request.getContentLengthLong();
        return declared > 0 ? declared <= MAX_DISCARDED : request.getHeader("Transfer-Encoding") != null;
    }

    private static void discard(HttpServletRequest request) {
        try {
            InferBodyFilter.Drain.rest(request.getInputStream(), MAX_DISCARDED);
        } catch (IOException | IllegalStateException e) {
            // the connection failed, or the body was taken as a reader: nothing to keep usable
        }
    }
}
