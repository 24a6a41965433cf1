package io.etserve.tracing;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.tracing.Span;
import io.micrometer.tracing.Tracer;
import io.micrometer.tracing.otel.bridge.OtelBaggageManager;
import io.micrometer.tracing.otel.bridge.OtelCurrentTraceContext;
import io.micrometer.tracing.otel.bridge.OtelTracer;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** Work carried to another thread stays in the request's span. */
class TracedInferenceSpansTest {

    private final SdkTracerProvider provider = SdkTracerProvider.builder().build();
    private final OtelCurrentTraceContext current = new OtelCurrentTraceContext();
    private final Tracer tracer = new OtelTracer(provider.get("test"), current, event -> {},
            new OtelBaggageManager(current, List.of(), List.of()));
    private final TracedInferenceSpans spans = new TracedInferenceSpans(tracer);

    @AfterEach
    void close() {
        provider.close();
    }

    @Test
    void aCarriedTaskRunsOnAnotherThreadInsideTheSpanCurrentWhereItWasCarried() throws Exception {
        Span request = tracer.nextSpan().name("request").start();
        AtomicReference<String> seen = new AtomicReference<>("none");
        Runnable carried;
        try (Tracer.SpanInScope scope = tracer.withSpan(request)) {
            carried = spans.carry(() -> {
                Span there = tracer.currentSpan();
                seen.set(there == null ? "no span" : there.context().spanId());
            });
        }
        Thread other = new Thread(carried);
        other.start();
        other.join();

        assertThat(seen.get()).isEqualTo(request.context().spanId());
        assertThat(tracer.currentSpan()).as("nothing left in scope here").isNull();
        request.end();
    }

    @Test
    void withoutACurrentSpanTheTaskIsCarriedAsItIs() {
        Runnable task = () -> {};
        assertThat(spans.carry(task)).isSameAs(task);
    }
}
