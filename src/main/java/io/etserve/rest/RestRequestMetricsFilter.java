package io.etserve.rest;

import io.etserve.metrics.ProtocolMetrics;
import jakarta.servlet.AsyncEvent;
import jakarta.servlet.AsyncListener;
import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;

/**
 * Counts each REST inference call once its answer is decided ({@link ProtocolMetrics}, protocol
 * {@code rest}): after the chain for a request answered on its thread, or when the async cycle
 * of a body read without a thread completes. Outermost on {@code /v2/models/*}: refusals made by
 * the body filter count too.
 */
public final class RestRequestMetricsFilter implements Filter {

    private final ProtocolMetrics metrics;

    public RestRequestMetricsFilter(ProtocolMetrics metrics) {
        this.metrics = metrics;
    }

    @Override
    public void doFilter(ServletRequest req, ServletResponse res, FilterChain chain)
            throws IOException, ServletException {
        HttpServletRequest request = (HttpServletRequest) req;
        if (!InferBodyFilter.isInfer(request)) {
            chain.doFilter(req, res);
            return;
        }
        long start = System.nanoTime();
        String model = modelOf(request.getRequestURI());
        HttpServletResponse response = (HttpServletResponse) res;
        try {
            chain.doFilter(req, res);
        } finally {
            if (request.isAsyncStarted()) {
                request.getAsyncContext().addListener(new AsyncListener() {
                    @Override
                    public void onComplete(AsyncEvent event) {
                        metrics.record("rest", model, response.getStatus(), System.nanoTime() - start);
                    }

                    @Override
                    public void onTimeout(AsyncEvent event) {}

                    @Override
                    public void onError(AsyncEvent event) {}

                    @Override
                    public void onStartAsync(AsyncEvent event) {}
                });
            } else {
                metrics.record("rest", model, response.getStatus(), System.nanoTime() - start);
            }
        }
    }

    /** {@code /v2/models/{m}[/versions/{v}]/infer} -> m (still URL-encoded: unknown names are not kept). */
    static String modelOf(String uri) {
        String prefix = "/v2/models/";
        if (!uri.startsWith(prefix)) {
            return null;
        }
        int end = uri.indexOf('/', prefix.length());
        return end < 0 ? null : uri.substring(prefix.length(), end);
    }
}
