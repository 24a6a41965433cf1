package io.etserve.tracing;

import io.etserve.execution.ExecutionSlot;
import io.etserve.execution.InferenceSpans;
import io.etserve.runtime.StreamSelection;
import io.micrometer.tracing.Link;
import io.micrometer.tracing.Span;
import io.micrometer.tracing.TraceContext;
import io.micrometer.tracing.Tracer;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * {@link InferenceSpans} on Micrometer Tracing (the OpenTelemetry bridge Spring Boot configures):
 * children of the request's span, which {@link RestTracingFilter} or {@link GrpcTracingInterceptor}
 * made current. A thread with no current span (warm-up, an internal call) records nothing.
 */
public final class TracedInferenceSpans implements InferenceSpans {

    /** Span and attribute names (docs/tracing.md lists them). */
    static final String QUEUE = "etserve.queue";
    static final String FORWARD = "etserve.forward";
    static final String ENCODE = "etserve.encode";
    static final String MODEL = "etserve.model";
    static final String VERSION = "etserve.model.version";

    private final Tracer tracer;

    public TracedInferenceSpans(Tracer tracer) {
        this.tracer = tracer;
    }

    @Override
    public void resolved(String model, String version) {
        Span request = tracer.currentSpan();
        if (request != null) {
            request.tag(MODEL, model).tag(VERSION, version);
        }
    }

    @Override
    public InferenceSpans.Phase queue(String model, String version) {
        return child(QUEUE, model, VERSION, version);
    }

    @Override
    public InferenceSpans.Phase forward(String model, String version, ExecutionSlot slot, int requests, int rows,
            List<Object> links) {
        Span parent = tracer.currentSpan();
        if (parent == null) {
            return NONE;
        }
        Span.Builder b = tracer.spanBuilder().setParent(parent.context()).name(FORWARD).tag(MODEL, model)
                .tag(VERSION, version)
                // The Module instance: an opaque id, the same for every call on it in this process.
                .tag("etserve.instance", Integer.toHexString(System.identityHashCode(slot.instance())));
        StreamSelection stream = slot.selection();
        if (stream.mode() == StreamSelection.Mode.NONE) {
            b.tag("etserve.device", "cpu");
        } else {
            b.tag("etserve.device", "cuda:" + stream.device())
                    .tag("etserve.stream", "0x" + Long.toHexString(stream.handle()));
        }
        if (rows > 0) {
            b.tag("etserve.batch.size", requests).tag("etserve.batch.rows", rows);
        }
        for (Object link : links) {
            b.addLink(new Link((TraceContext) link));
        }
        return new Traced(b.start());
    }

    @Override
    public InferenceSpans.Phase encode(String model, String protocol) {
        return child(ENCODE, model, "etserve.protocol", protocol);
    }

    @Override
    public Runnable carry(Runnable task) {
        Span request = tracer.currentSpan();
        if (request == null) {
            return task;
        }
        return () -> {
            try (Tracer.SpanInScope scope = tracer.withSpan(request)) {
                task.run();
            }
        };
    }

    private InferenceSpans.Phase child(String name, String model, String key, String value) {
        Span parent = tracer.currentSpan();
        if (parent == null) {
            return NONE;
        }
        return new Traced(tracer.nextSpan(parent).name(name).tag(MODEL, model).tag(key, value).start());
    }

    /** A started span; ended once, by whichever of close or endAt comes first. */
    private static final class Traced implements InferenceSpans.Phase {
        private final Span span;
        private boolean ended;

        Traced(Span span) {
            this.span = span;
        }

        @Override
        public void failed(Throwable error) {
            span.error(error);
        }

        @Override
        public void joined(BatchJoined batch) {
            if (batch != null) {
                TraceContext forward = (TraceContext) batch.forward();
                span.tag("etserve.batch.size", batch.requests()).tag("etserve.batch.rows", batch.rows())
                        .tag("etserve.batch.trace_id", forward.traceId())
                        .tag("etserve.batch.span_id", forward.spanId());
            }
        }

        @Override
        public Object context() {
            return span.context();
        }

        @Override
        public void endAt(long nanoTime) {
            if (!ended) {
                ended = true;
                Instant now = Instant.now();
                long epochNanos = now.getEpochSecond() * 1_000_000_000L + now.getNano();
                span.end(epochNanos - (System.nanoTime() - nanoTime), TimeUnit.NANOSECONDS);
            }
        }

        @Override
        public void close() {
            if (!ended) {
                ended = true;
                span.end();
            }
        }
    }
}
