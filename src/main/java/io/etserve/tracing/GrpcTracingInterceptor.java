package io.etserve.tracing;

import io.grpc.ForwardingServerCall;
import io.grpc.ForwardingServerCallListener;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;
import io.micrometer.tracing.Span;
import io.micrometer.tracing.Tracer;
import io.micrometer.tracing.propagation.Propagator;

/**
 * The span of a gRPC call, continued from the caller's {@code traceparent} metadata and current
 * while the service handles it; the answer's headers carry its {@code traceparent} (its trailers,
 * when a call fails before any header was sent). Micrometer's {@code ObservationGrpcServerInterceptor}
 * (micrometer-core) would also do the first part, but records a timer series per method besides
 * and returns no context, and REST and gRPC are better traced alike.
 */
public final class GrpcTracingInterceptor implements ServerInterceptor {

    private static final Propagator.Getter<Metadata> GET =
            (headers, key) -> headers.get(Metadata.Key.of(key, Metadata.ASCII_STRING_MARSHALLER));
    private static final Propagator.Setter<Metadata> SET =
            (headers, key, value) -> headers.put(Metadata.Key.of(key, Metadata.ASCII_STRING_MARSHALLER), value);

    private final ServerSpans spans;

    public GrpcTracingInterceptor(ServerSpans spans) {
        this.spans = spans;
    }

    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
            ServerCallHandler<Q, R> next) {
        var method = call.getMethodDescriptor();
        Span span = spans.start(method.getFullMethodName(), headers, GET).tag("rpc.system", "grpc")
                .tag("rpc.service", String.valueOf(method.getServiceName()))
                .tag("rpc.method", String.valueOf(method.getBareMethodName()));
        ServerCall<Q, R> traced = new ForwardingServerCall.SimpleForwardingServerCall<>(call) {
            private boolean headersSent;

            @Override
            public void sendHeaders(Metadata answer) {
                headersSent = true;
                spans.inject(span, answer, SET);
                super.sendHeaders(answer);
            }

            @Override
            public void close(Status status, Metadata trailers) {
                if (!headersSent) {
                    spans.inject(span, trailers, SET);
                }
                span.tag("rpc.grpc.status_code", status.getCode().value());
                if (!status.isOk()) {
                    span.tag("error.type", status.getCode().name());
                }
                super.close(status, trailers);
            }
        };
        ServerCall.Listener<Q> listener;
        try (Tracer.SpanInScope scope = spans.inScope(span)) {
            listener = next.startCall(traced, headers);
        } catch (RuntimeException e) {
            span.error(e).end();
            throw e;
        }
        return new ForwardingServerCallListener.SimpleForwardingServerCallListener<>(listener) {
            @Override
            public void onMessage(Q message) {
                try (Tracer.SpanInScope scope = spans.inScope(span)) {
                    super.onMessage(message);
                }
            }

            @Override
            public void onHalfClose() {
                try (Tracer.SpanInScope scope = spans.inScope(span)) {
                    super.onHalfClose();
                }
            }

            @Override
            public void onReady() {
                try (Tracer.SpanInScope scope = spans.inScope(span)) {
                    super.onReady();
                }
            }

            @Override
            public void onCancel() {
                try (Tracer.SpanInScope scope = spans.inScope(span)) {
                    super.onCancel();
                } finally {
                    span.event("cancelled").end();
                }
            }

            @Override
            public void onComplete() {
                try (Tracer.SpanInScope scope = spans.inScope(span)) {
                    super.onComplete();
                } finally {
                    span.end();
                }
            }
        };
    }
}
