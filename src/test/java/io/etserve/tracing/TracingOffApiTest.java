package io.etserve.tracing;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.execution.InferenceService;
import io.etserve.execution.InferenceSpans;
import io.etserve.grpc.GrpcServer;
import io.etserve.support.Http;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.TestPaths;
import io.micrometer.tracing.Tracer;
import io.micrometer.tracing.handler.TracingObservationHandler;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.sdk.logs.LogRecordProcessor;
import io.opentelemetry.sdk.trace.SpanProcessor;
import io.prometheus.metrics.tracer.common.SpanContext;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.ApplicationContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Tracing as shipped (application.yml: off), with an OTLP endpoint configured and listening:
 * calls that carry a {@code traceparent} answer without one, nothing is exported, and the
 * inference path holds no tracing piece at all.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class TracingOffApiTest {

    static final OtlpReceiver OTLP = OtlpReceiver.start();
    static final String TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-tracing-off-")
            .copy(TestPaths.demoModels(), "demo-portable");

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("management.server.port", () -> "0");
        r.add("management.opentelemetry.tracing.export.otlp.endpoint", OTLP::endpoint);
        r.add("management.opentelemetry.tracing.export.schedule-delay", () -> "50ms");
        r.add("management.tracing.sampling.probability", () -> "1.0");
    }

    @AfterAll
    static void stopReceiver() {
        OTLP.close();
    }

    @Value("${local.server.port}")
    int port;

    @Value("${local.management.port}")
    int managementPort;

    @Autowired
    GrpcServer grpcServer;

    @Autowired
    InferenceService inference;

    @Autowired
    ApplicationContext context;

    @Test
    void callsCarryNoTraceHeaderAndNothingIsExported() throws Exception {
        Http.Response rest = Http.local(port).post("/v2/models/demo-portable/infer",
                ("{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,16],\"data\":"
                        + "[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1]}]}").getBytes(),
                Map.of("Content-Type", "application/json", "traceparent", TRACEPARENT));
        assertThat(rest.status()).isEqualTo(200);
        assertThat(rest.header("traceparent")).isNull();
        // Other endpoints too (Spring observes those itself).
        Http.Response health = Http.local(port).get("/v2/health/ready");
        assertThat(health.header("traceparent")).isNull();
        assertThat(Http.local(managementPort).get("/actuator/health").status()).isEqualTo(200);

        DemoGrpcCall call = DemoGrpcCall.run(grpcServer.port(), TRACEPARENT);
        assertThat(call.answerHeader()).isNull();
        assertThat(call.answerTrailer()).isNull();

        // Forty export intervals: a span would have been sent by now.
        Thread.sleep(2000);
        assertThat(OTLP.exports()).isZero();
    }

    @Test
    void theInferencePathHoldsNoTracingPiece() {
        assertThat(inference.spans()).isSameAs(InferenceSpans.OFF);
        assertThat(context.containsBean("restTracingFilter")).isFalse();
        assertThat(context.getBeansOfType(GrpcTracingInterceptor.class)).isEmpty();
        assertThat(context.getBeanNamesForType(ServerSpans.class)).isEmpty();
        // No Prometheus exemplars: they would ask for the current span on every histogram sample.
        assertThat(context.getBeanNamesForType(SpanContext.class)).isEmpty();
    }

    @Test
    void noTracingIsConfiguredAtAll() {
        // No OpenTelemetry SDK, no span or log processors (each with a worker thread), no
        // tracing handler on the observations Spring makes of the other endpoints.
        assertThat(context.getBeanNamesForType(OpenTelemetry.class)).isEmpty();
        assertThat(context.getBeanNamesForType(SpanProcessor.class)).isEmpty();
        assertThat(context.getBeanNamesForType(LogRecordProcessor.class)).isEmpty();
        assertThat(context.getBeanNamesForType(TracingObservationHandler.class)).isEmpty();
        // Whoever asks for a tracer gets Spring Boot's no-op one.
        assertThat(context.getBean(Tracer.class)).isSameAs(Tracer.NOOP);
    }
}
