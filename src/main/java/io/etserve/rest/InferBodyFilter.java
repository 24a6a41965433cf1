package io.etserve.rest;

import io.etserve.inference.InflightBytes;
import io.etserve.runtime.DirectBufferPool;
import jakarta.servlet.AsyncContext;
import jakarta.servlet.AsyncEvent;
import jakarta.servlet.AsyncListener;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ReadListener;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletInputStream;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.http.HttpStatus;

/**
 * Reads an inference request's body without holding a request thread while it waits, then
 * serves it: a plain model path through {@link InferExchange} directly, anything else through the
 * controller. A slow client (a trickled or stalled upload) costs one connection and the bytes it
 * sent, never a parked thread: the body is read with the servlet's non-blocking I/O (a container
 * thread runs only when bytes have arrived, to copy them) and the request is served once the
 * whole body is here. A body that has not arrived within
 * {@code etserve.inference.body-timeout} is answered 408.
 *
 * <p>A refused body (503: the byte budget is spent; 413: over the size limit) is read to its end
 * and thrown away before the answer, up to one more limit's worth: a client that sends its whole
 * body before reading (most do) would otherwise find the connection reset under its upload and
 * never see why. Past that bound, or when the client asked {@code Expect: 100-continue} and has
 * sent nothing, the answer goes at once and the connection closes.
 */
public final class InferBodyFilter implements Filter {

    /** Request attribute holding the {@link RequestBody} on the dispatched pass. */
    static final String BODY = InferBodyFilter.class.getName() + ".body";

    private static final Logger log = LoggerFactory.getLogger(InferBodyFilter.class);

    private final Supplier<InferExchange> exchange;
    private final InflightBytes inflight;
    private final DirectBufferPool pool;
    private final long maxBytes;
    private final Duration bodyTimeout;

    /**
     * @param exchange runs the usual request here, without Spring MVC's dispatch (see
     *     {@link InferExchange}), asked for when a request is served that way (a memoized lookup:
     *     the filter is made while the web server is created, before the inference beans)
     */
    public InferBodyFilter(InflightBytes inflight, DirectBufferPool pool, long maxBytes, Duration bodyTimeout,
            Supplier<InferExchange> exchange) {
        this.exchange = exchange;
        this.inflight = inflight;
        this.pool = pool;
        this.maxBytes = maxBytes;
        this.bodyTimeout = bodyTimeout;
    }

    @Override
    public void doFilter(ServletRequest req, ServletResponse res, FilterChain chain)
            throws IOException, ServletException {
        HttpServletRequest request = (HttpServletRequest) req;
        HttpServletResponse response = (HttpServletResponse) res;
        if (request.getDispatcherType() == DispatcherType.ASYNC) {
            // The body arrived: run the exchange, then give its bytes back to the budget.
            Object body = request.getAttribute(BODY);
            try {
                proceed(request, response, chain, body instanceof RequestBody b ? b : null);
            } finally {
                if (body instanceof RequestBody b) {
                    b.close();
                }
            }
            return;
        }
        if (!isInfer(request) || !request.isAsyncSupported()) {
            chain.doFilter(req, res);
            return;
        }
        long declared = request.getContentLengthLong();
        RequestBody body;
        try {
            body = new RequestBody(inflight, pool, maxBytes, declared, RequestBody.headerLength(request));
        } catch (ApiException e) {
            // Declared over the limit. Within one more limit's worth the body is read and thrown
            // away first, so the client reads the 413 instead of a reset; a client that waits for
            // 100-continue has sent nothing and is answered at once.
            if (declared - maxBytes > maxBytes || "100-continue".equalsIgnoreCase(request.getHeader("Expect"))) {
                e.writeTo(response, true);
                return;
            }
            AsyncContext async = request.startAsync();
            async.setTimeout(bodyTimeout.toMillis());
            Reader reader = new Reader(request, response, async, null);
            reader.refusal = e;
            reader.drain = new Drain(declared);
            async.addListener(reader);
            request.getInputStream().setReadListener(reader);
            return;
        }
        if (declared >= 0 && request.getInputStream().available() >= declared) {
            // The whole body came with the headers (the usual small request): reading it cannot
            // block, so it is read here and the request goes on without an async dispatch.
            try (body) {
                try {
                    body.readAll(request.getInputStream());
                } catch (ApiException e) {
                    body.close();
                    // The rest is already buffered, so reading it past the refusal cannot block.
                    boolean drained = drainsFirst(e) && Drain.rest(request.getInputStream(), maxBytes);
                    e.writeTo(response, !drained);
                    return;
                }
                request.setAttribute(BODY, body);
                proceed(request, response, chain, body);
            }
            return;
        }
        AsyncContext async = request.startAsync();
        async.setTimeout(bodyTimeout.toMillis());
        Reader reader = new Reader(request, response, async, body);
        async.addListener(reader);
        request.getInputStream().setReadListener(reader);
    }

    /** Reads and throws away the rest of a refused body, at most {@code limit} bytes of it. */
    static final class Drain {

        private final byte[] scratch = new byte[8192];
        private long left;

        Drain(long limit) {
            this.left = limit;
        }

        /**
         * @return the bytes discarded, or -1 at the end of the body
         * @throws ApiException 413 when more than the limit arrives
         */
        int readFrom(InputStream in) throws IOException {
            int n = in.read(scratch);
            if (n > 0 && (left -= n) < 0) {
                throw new ApiException(HttpStatus.CONTENT_TOO_LARGE, "request body exceeds the size limit");
            }
            return n;
        }

        /** Discards what is left of a body that is already buffered; false when it was too long. */
        static boolean rest(InputStream in, long limit) throws IOException {
            Drain drain = new Drain(limit);
            try {
                while (drain.readFrom(in) >= 0) {
                    // discard
                }
                return true;
            } catch (ApiException tooLong) {
                return false;
            }
        }
    }

    /** Refusals answered only once the rest of the body has been read and thrown away. */
    private static boolean drainsFirst(ApiException e) {
        return e.status() == HttpStatus.SERVICE_UNAVAILABLE || e.status() == HttpStatus.CONTENT_TOO_LARGE;
    }

    /** The exchange directly when it serves this request, else on to Spring MVC and the controller. */
    private void proceed(HttpServletRequest request, HttpServletResponse response, FilterChain chain, RequestBody body)
            throws IOException, ServletException {
        InferExchange.Target target = body != null ? InferExchange.directTarget(request) : null;
        if (target != null) {
            exchange.get().serveDirect(target, request, response, body);
        } else {
            chain.doFilter(request, response);
        }
    }

    /** A POST to an {@code .../infer} path: an inference call. */
    public static boolean isInfer(HttpServletRequest request) {
        return isInfer(request.getMethod(), request.getRequestURI());
    }

    /** As {@link #isInfer(HttpServletRequest)}, from the method and the path as sent (not decoded). */
    static boolean isInfer(String method, String path) {
        return "POST".equals(method) && path != null && path.endsWith("/infer");
    }

    /** Moves bytes from the connection into the body as they arrive; ends in exactly one of dispatch or error. */
    private final class Reader implements ReadListener, AsyncListener {

        private final HttpServletRequest request;
        private final HttpServletResponse response;
        private final AsyncContext async;
        private final RequestBody body;  // null when the body was refused before it was read
        private final AtomicBoolean settled = new AtomicBoolean();
        /** A refusal waiting for the rest of its body to be discarded; then it is answered. */
        private ApiException refusal;
        private Drain drain;

        Reader(HttpServletRequest request, HttpServletResponse response, AsyncContext async, RequestBody body) {
            this.request = request;
            this.response = response;
            this.async = async;
            this.body = body;
        }

        @Override
        public void onDataAvailable() throws IOException {
            ServletInputStream in = request.getInputStream();
            // Read until isReady() says false (only then is onDataAvailable called again), the
            // end of the body, or an answer.
            while (!settled.get() && in.isReady()) {
                try {
                    if ((refusal != null ? drain.readFrom(in) : body.readFrom(in)) < 0) {
                        return;
                    }
                } catch (ApiException e) {
                    refuse(e);
                }
            }
        }

        @Override
        public void onAllDataRead() {
            if (refusal != null) {
                answer(refusal, false);
            } else if (settled.compareAndSet(false, true)) {
                request.setAttribute(BODY, body);
                async.dispatch();
            }
        }

        /**
         * A spent budget (503) or a body over the limit (413) is answered once the rest of the
         * body has been read and thrown away: the client then reads the answer on a connection
         * that stays open. Closing a connection with unread bytes in it resets it, and the client
         * may never see why. Discarding costs a small scratch array, not the budget; the body
         * timeout and one more limit's worth of bytes bound it (past that: 413 and close).
         * Anything else (a broken body) is answered at once and closes.
         */
        private void refuse(ApiException e) {
            if (refusal == null && drainsFirst(e)) {
                long read = body.length();
                body.close();
                refusal = e;
                drain = new Drain(e.status() == HttpStatus.SERVICE_UNAVAILABLE ? maxBytes - read : maxBytes);
                return;
            }
            fail(e);
        }

        @Override
        public void onError(Throwable t) {
            log.debug("request body could not be read: {}", t.toString());
            if (stalled(t)) {
                // The connection's idle timeout (server.jetty.connection-idle-timeout) ended a body
                // that stopped arriving: the same answer as the body timeout, whichever comes first.
                fail(refusal != null ? refusal : new ApiException(HttpStatus.REQUEST_TIMEOUT,
                        "the request body stopped arriving (" + body.length() + " bytes received): " + t.getMessage()));
                return;
            }
            fail(new ApiException(HttpStatus.BAD_REQUEST, "cannot read the request body: " + t.getMessage()));
        }

        private static boolean stalled(Throwable t) {
            for (Throwable c = t; c != null; c = c.getCause()) {
                if (c instanceof java.util.concurrent.TimeoutException) {
                    return true;
                }
            }
            return false;
        }

        @Override
        public void onTimeout(AsyncEvent event) {
            if (refusal != null) {
                fail(refusal);  // the answer was decided; the rest of the body never came
                return;
            }
            fail(new ApiException(HttpStatus.REQUEST_TIMEOUT, "the request body did not arrive within "
                    + bodyTimeout.toMillis() + " ms (" + body.length() + " bytes received)"));
        }

        @Override
        public void onError(AsyncEvent event) {
            fail(new ApiException(HttpStatus.BAD_REQUEST, "connection failed while reading the request body"));
        }

        @Override
        public void onComplete(AsyncEvent event) {
            if (body != null) {
                body.close();
            }
        }

        @Override
        public void onStartAsync(AsyncEvent event) {}

        /** Answers {@code e} and closes the connection: the rest of the body was never read. */
        private void fail(ApiException e) {
            answer(e, true);
        }

        private void answer(ApiException e, boolean closeConnection) {
            if (!settled.compareAndSet(false, true)) {
                return;
            }
            if (body != null) {
                body.close();
            }
            try {
                if (!response.isCommitted()) {
                    e.writeTo(response, closeConnection);
                }
            } catch (IOException | RuntimeException ignored) {
                // The client is gone; nothing to tell it.
            } finally {
                async.complete();
            }
        }
    }
}
