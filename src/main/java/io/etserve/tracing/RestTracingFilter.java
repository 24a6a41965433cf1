package io.etserve.tracing;

import io.etserve.rest.InferBodyFilter;
import io.micrometer.tracing.Span;
import io.micrometer.tracing.Tracer;
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
 * The span of a REST inference call, from its head to its last byte: started on the request's
 * first pass (before the body is read), current on every pass that runs the chain (the body
 * filter dispatches again once the body is here), ended when the exchange completes. Its
 * {@code traceparent} is set on the response before anything is written. Other endpoints keep
 * Spring's own {@code http.server.requests} observation, which inference calls skip.
 */
public final class RestTracingFilter implements Filter {

    static final String SPAN_NAME = "POST /v2/models/{model}/infer";
    private static final String SPAN = RestTracingFilter.class.getName() + ".span";

    private final ServerSpans spans;

    public RestTracingFilter(ServerSpans spans) {
        this.spans = spans;
    }

    @Override
    public void doFilter(ServletRequest req, ServletResponse res, FilterChain chain)
            throws IOException, ServletException {
        HttpServletRequest request = (HttpServletRequest) req;
        HttpServletResponse response = (HttpServletResponse) res;
        if (!InferBodyFilter.isInfer(request)) {
            chain.doFilter(req, res);
            return;
        }
        Span span = (Span) request.getAttribute(SPAN);
        boolean first = span == null;
        if (first) {
            span = spans.start(SPAN_NAME, request, HttpServletRequest::getHeader)
                    .tag("http.request.method", request.getMethod()).tag("http.route", "/v2/models/{model}/infer")
                    .tag("url.path", request.getRequestURI());
            request.setAttribute(SPAN, span);
            spans.inject(span, response, HttpServletResponse::setHeader);
        }
        try (Tracer.SpanInScope scope = spans.inScope(span)) {
            chain.doFilter(req, res);
        } catch (IOException | ServletException | RuntimeException e) {
            span.error(e);
            throw e;
        } finally {
            if (first) {
                if (request.isAsyncStarted()) {
                    request.getAsyncContext().addListener(new Ending(span, response));
                } else {
                    end(span, response);
                }
            }
        }
    }

    private static void end(Span span, HttpServletResponse response) {
        int status = response.getStatus();
        span.tag("http.response.status_code", status);
        if (status >= 500) {
            span.tag("error.type", Integer.toString(status));
        }
        span.end();
    }

    /** Ends the span when the async cycle of a body read without a thread completes. */
    private record Ending(Span span, HttpServletResponse response) implements AsyncListener {
        @Override
        public void onComplete(AsyncEvent event) {
            end(span, response);
        }

        @Override
        public void onTimeout(AsyncEvent event) {
            span.event("timeout");
        }

        @Override
        public void onError(AsyncEvent event) {
            if (event.getThrowable() != null) {
                span.error(event.getThrowable());
            }
        }

        @Override
        public void onStartAsync(AsyncEvent event) {}
    }
}
