package io.etserve.tracing;

import io.micrometer.tracing.Span;
import io.micrometer.tracing.Tracer;
import io.micrometer.tracing.propagation.Propagator;

/**
 * The span of one request as the server receives it, REST or gRPC: continued from the caller's
 * W3C {@code traceparent} when it sends one (a new trace otherwise), and its own context written
 * back into the answer's headers, so a caller learns the trace and span id of its request.
 */
public final class ServerSpans {

    private final Tracer tracer;
    private final Propagator propagator;

    public ServerSpans(Tracer tracer, Propagator propagator) {
        this.tracer = tracer;
        this.propagator = propagator;
    }

    /** A started SERVER span, child of the context {@code carrier}'s headers carry, if any. */
    <C> Span start(String name, C carrier, Propagator.Getter<C> headers) {
        return propagator.extract(carrier, headers).kind(Span.Kind.SERVER).name(name).start();
    }

    /** Writes {@code span}'s context ({@code traceparent}) into the answer's headers. */
    <C> void inject(Span span, C carrier, Propagator.Setter<C> headers) {
        propagator.inject(span.context(), carrier, headers);
    }

    /** {@code span} as the thread's current span until the scope closes. */
    Tracer.SpanInScope inScope(Span span) {
        return tracer.withSpan(span);
    }
}
