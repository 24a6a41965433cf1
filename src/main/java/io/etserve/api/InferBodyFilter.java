package io.etserve.api;

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
import io.etserve.runtime.DirectBufferPool;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.http.HttpStatus;

/**
 * Reads an inference request's body without holding a request thread while it waits, then
 * hands it to the controller. A slow client (a trickled or stalled upload) costs one connection
 * and the bytes it sent, never a parked thread: the body is read with the servlet's non-blocking
 * I/O (a container thread runs only when bytes have arrived, to copy them) and the request is
 * dispatched to the controller once the whole body is here. A body that has not arrived within
 * {@code etserve.inference.body-timeout} is answered 408.
 */
public final class InferBodyFilter implements Filter {

    /** Request attribute holding the {@link RequestBody} on the dispatched pass. */
    static final String BODY = InferBodyFilter.class.getName() + ".body";

    private static final Logger log = LoggerFactory.getLogger(InferBodyFilter.class);

    private final InflightBytes inflight;
    private final DirectBufferPool pool;
    private final long maxBytes;
    private final Duration bodyTimeout;

    public InferBodyFilter(InflightBytes inflight, DirectBufferPool pool, long maxBytes, Duration bodyTimeout) {
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
            // The body arrived: run the controller, then give its bytes back to the budget.
            Object body = request.getAttribute(BODY);
            try {
                chain.doFilter(req, res);
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
            ErrorResponses.write(response, e, true);
            return;
        }
        if (declared >= 0 && request.getInputStream().available() >= declared) {
            // The whole body came with the headers (the usual small request): reading it cannot
            // block, so it is read here and the request goes on without an async dispatch.
            try (body) {
                try {
                    body.readAll(request.getInputStream());
                } catch (ApiException e) {
                    ErrorResponses.write(response, e, true);
                    return;
                }
                request.setAttribute(BODY, body);
                chain.doFilter(req, res);
            }
            return;
        }
        AsyncContext async = request.startAsync();
        async.setTimeout(bodyTimeout.toMillis());
        Reader reader = new Reader(request, response, async, body);
        async.addListener(reader);
        request.getInputStream().setReadListener(reader);
    }

    /** A POST to an {@code .../infer} path: an inference call. */
    public static boolean isInfer(HttpServletRequest request) {
        return "POST".equals(request.getMethod()) && request.getRequestURI().endsWith("/infer");
    }

    /** Moves bytes from the connection into the body as they arrive; ends in exactly one of dispatch or error. */
    private final class Reader implements ReadListener, AsyncListener {

        private final HttpServletRequest request;
        private final HttpServletResponse response;
        private final AsyncContext async;
        private final RequestBody body;
        private final AtomicBoolean settled = new AtomicBoolean();

        Reader(HttpServletRequest request, HttpServletResponse response, AsyncContext async, RequestBody body) {
            this.request = request;
            this.response = response;
            this.async = async;
            this.body = body;
        }

        @Override
        public void onDataAvailable() throws IOException {
            ServletInputStream in = request.getInputStream();
            try {
                while (!settled.get() && in.isReady()) {
                    if (body.readFrom(in) < 0) {
                        return;
                    }
                }
            } catch (ApiException e) {
                fail(e);
            }
        }

        @Override
        public void onAllDataRead() {
            if (settled.compareAndSet(false, true)) {
                request.setAttribute(BODY, body);
                async.dispatch();
            }
        }

        @Override
        public void onError(Throwable t) {
            log.debug("request body could not be read: {}", t.toString());
            fail(new ApiException(HttpStatus.BAD_REQUEST, "cannot read the request body: " + t.getMessage()));
        }

        @Override
        public void onTimeout(AsyncEvent event) {
            fail(new ApiException(HttpStatus.REQUEST_TIMEOUT, "the request body did not arrive within "
                    + bodyTimeout.toMillis() + " ms (" + body.length() + " bytes received)"));
        }

        @Override
        public void onError(AsyncEvent event) {
            fail(new ApiException(HttpStatus.BAD_REQUEST, "connection failed while reading the request body"));
        }

        @Override
        public void onComplete(AsyncEvent event) {
            body.close();
        }

        @Override
        public void onStartAsync(AsyncEvent event) {}

        /** Answers {@code e} and closes the connection: the rest of the body was never read. */
        private void fail(ApiException e) {
            if (!settled.compareAndSet(false, true)) {
                return;
            }
            body.close();
            try {
                if (!response.isCommitted()) {
                    ErrorResponses.write(response, e, true);
                }
            } catch (IOException | RuntimeException ignored) {
                // The client is gone; nothing to tell it.
            } finally {
                async.complete();
            }
        }
    }
}
