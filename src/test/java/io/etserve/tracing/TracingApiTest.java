package io.etserve.tracing;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.grpc.GrpcServer;
import io.etserve.support.Http;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.TestPaths;
import io.opentelemetry.proto.trace.v1.Span.SpanKind;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Tracing on: REST and gRPC inference calls carrying a W3C {@code traceparent} are continued in
 * the caller's trace, answer with their own {@code traceparent}, and their spans (request,
 * queue, forward, encode; a dynamic batch's links) reach a real OTLP/HTTP endpoint on a socket.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class TracingApiTest {

    static final OtlpReceiver OTLP = OtlpReceiver.start();
    static final Pattern TRACEPARENT = Pattern.compile("00-([0-9a-f]{32})-([0-9a-f]{16})-(0[01])");
    static final Duration WAIT = Duration.ofSeconds(20);

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-tracing-")
            .copy(TestPaths.demoModels(), "demo-portable")
            .copy(TestPaths.testModels(), "batched-probe", "batched")
            // Two requests make a batch; the long delay makes sure they wait for each other.
            .withFile("batched/config.yml", "inputs: [ { name: x, dims: [-1, 2] } ]\noutputs: [ { name: observed } ]\n"
                    + "instances: 1\ndynamic-batching: { max-batch-size: 8, max-queue-delay: 10s,"
                    + " preferred-batch-sizes: [2] }\n");

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("etserve.native.extra-libraries", () -> TestPaths.probeDelegate().toString());
        r.add("management.server.port", () -> "0");
        r.add("etserve.tracing.enabled", () -> "true");
        r.add("management.opentelemetry.tracing.export.otlp.endpoint", OTLP::endpoint);
        r.add("management.opentelemetry.tracing.export.schedule-delay", () -> "50ms");
        // Nothing is sampled on its own: what arrives was sampled by its caller (parent-based).
        r.add("management.tracing.sampling.probability", () -> "0.0");
    }

    @AfterAll
    static void stopReceiver() {
        OTLP.close();
    }

    @Value("${local.server.port}")
    int port;

    @Autowired
    GrpcServer grpcServer;

    static String randomHex(int bytes) {
        byte[] b = new byte[bytes];
        ThreadLocalRandom.current().nextBytes(b);
        return HexFormat.of().formatHex(b);
    }

    record Caller(String traceId, String parentSpanId) {
        static Caller random() {
            return new Caller(randomHex(16), randomHex(8));
        }

        String traceparent() {
            return "00-" + traceId + "-" + parentSpanId + "-01";
        }
    }

    static final String DEMO_INPUT = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,16],\"data\":["
            + "0.5,-1,2,0,0,1,0,0,0,0,3,0,0,0,0,1]}]}";

    Http.Response restInfer(String model, String body, Caller caller) {
        Map<String, String> headers = caller == null ? Map.of("Content-Type", "application/json")
                : Map.of("Content-Type", "application/json", "traceparent", caller.traceparent());
        return Http.local(port).post("/v2/models/" + model + "/infer", body.getBytes(), headers);
    }

    /** The span id the answer's traceparent names, after checking it continues {@code caller}'s trace. */
    static String answeredSpanId(String traceparent, Caller caller) {
        assertThat(traceparent).as("traceparent of the answer").isNotNull();
        Matcher m = TRACEPARENT.matcher(traceparent);
        assertThat(m.matches()).as(traceparent).isTrue();
        assertThat(m.group(1)).isEqualTo(caller.traceId());
        assertThat(m.group(2)).isNotEqualTo(caller.parentSpanId());
        assertThat(m.group(3)).isEqualTo("01");
        return m.group(2);
    }

    static Map<String, List<OtlpReceiver.Received>> byName(List<OtlpReceiver.Received> spans) {
        return spans.stream().collect(Collectors.groupingBy(OtlpReceiver.Received::name));
    }

    static boolean has(List<OtlpReceiver.Received> spans, String... names) {
        var present = byName(spans).keySet();
        return present.containsAll(List.of(names));
    }

    /**
     * The caller's trace once it arrived: the request span, continued from the caller, with its
     * queue, forward and encode spans as children; returns the request span.
     */
    static OtlpReceiver.Received awaitRequestTrace(String requestName, String requestSpanId, Caller caller,
            String model, String protocol) throws InterruptedException {
        var spans = OTLP.awaitTrace(caller.traceId(),
                s -> has(s, requestName, "etserve.queue", "etserve.forward", "etserve.encode"), WAIT);
        var named = byName(spans);
        OtlpReceiver.Received request = named.get(requestName).get(0);
        assertThat(request.service()).isEqualTo("etserve");
        assertThat(request.span().getKind()).isEqualTo(SpanKind.SPAN_KIND_SERVER);
        assertThat(request.parentSpanId()).isEqualTo(caller.parentSpanId());
        assertThat(request.spanId()).isEqualTo(requestSpanId);
        assertThat(request.attribute("etserve.model")).isEqualTo(model);
        assertThat(request.attribute("etserve.model.version")).isEqualTo("1");
        for (String child : List.of("etserve.queue", "etserve.forward", "etserve.encode")) {
            assertThat(named.get(child)).as(child).hasSize(1);
            OtlpReceiver.Received span = named.get(child).get(0);
            assertThat(span.parentSpanId()).as(child + "'s parent").isEqualTo(request.spanId());
            assertThat(span.attribute("etserve.model")).as(child).isEqualTo(model);
            long start = span.span().getStartTimeUnixNano();
            assertThat(start).as(child + " inside the request").isBetween(request.span().getStartTimeUnixNano(),
                    request.span().getEndTimeUnixNano());
        }
        OtlpReceiver.Received forward = named.get("etserve.forward").get(0);
        assertThat(forward.attribute("etserve.model.version")).isEqualTo("1");
        assertThat(forward.attribute("etserve.device")).isEqualTo("cpu");
        assertThat(forward.attribute("etserve.instance")).matches("[0-9a-f]+");
        OtlpReceiver.Received queue = named.get("etserve.queue").get(0);
        assertThat(queue.span().getEndTimeUnixNano()).isLessThanOrEqualTo(forward.span().getStartTimeUnixNano());
        assertThat(named.get("etserve.encode").get(0).attribute("etserve.protocol")).isEqualTo(protocol);
        return request;
    }

    @Test
    void aRestCallContinuesTheCallersTraceAndExportsItsSpans() throws Exception {
        Caller caller = Caller.random();
        Http.Response r = restInfer("demo-portable", DEMO_INPUT, caller);
        assertThat(r.status()).isEqualTo(200);
        String spanId = answeredSpanId(r.header("traceparent"), caller);

        OtlpReceiver.Received request = awaitRequestTrace("POST /v2/models/{model}/infer", spanId, caller,
                "demo-portable", "rest");
        assertThat(request.attribute("http.response.status_code")).isEqualTo("200");
        assertThat(request.attribute("url.path")).isEqualTo("/v2/models/demo-portable/infer");
    }

    @Test
    void aGrpcCallContinuesTheCallersTraceAndExportsItsSpans() throws Exception {
        Caller caller = Caller.random();
        DemoGrpcCall call = DemoGrpcCall.run(grpcServer.port(), caller.traceparent());
        String spanId = answeredSpanId(call.answerHeader(), caller);

        OtlpReceiver.Received request = awaitRequestTrace("inference.GRPCInferenceService/ModelInfer", spanId,
                caller, "demo-portable", "grpc");
        assertThat(request.attribute("rpc.system")).isEqualTo("grpc");
        assertThat(request.attribute("rpc.method")).isEqualTo("ModelInfer");
        assertThat(request.attribute("rpc.grpc.status_code")).isEqualTo("0");
    }

    @Test
    void requestsInOneDynamicBatchEachRecordTheBatchAndItsForwardSpanLinksThemAll() throws Exception {
        Caller first = Caller.random();
        Caller second = Caller.random();
        String body = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2],\"data\":[0,0]}]}";
        var a = CompletableFuture.supplyAsync(() -> restInfer("batched", body, first));
        var b = CompletableFuture.supplyAsync(() -> restInfer("batched", body, second));
        assertThat(a.get(30, TimeUnit.SECONDS).status()).isEqualTo(200);
        assertThat(b.get(30, TimeUnit.SECONDS).status()).isEqualTo(200);

        String name = "POST /v2/models/{model}/infer";
        var one = OTLP.awaitTrace(first.traceId(), s -> has(s, name, "etserve.queue", "etserve.encode"), WAIT);
        var two = OTLP.awaitTrace(second.traceId(), s -> has(s, name, "etserve.queue", "etserve.encode"), WAIT);
        // The batch's forward call ran once, in the trace of the request that led it.
        List<OtlpReceiver.Received> forwards = new ArrayList<>();
        Optional.ofNullable(byName(one).get("etserve.forward")).ifPresent(forwards::addAll);
        Optional.ofNullable(byName(two).get("etserve.forward")).ifPresent(forwards::addAll);
        assertThat(forwards).hasSize(1);
        OtlpReceiver.Received forward = forwards.get(0);
        assertThat(forward.attribute("etserve.batch.size")).isEqualTo("2");
        assertThat(forward.attribute("etserve.batch.rows")).isEqualTo("2");

        List<String> linked = forward.span().getLinksList().stream()
                .map(l -> HexFormat.of().formatHex(l.getTraceId().toByteArray()) + "/"
                        + HexFormat.of().formatHex(l.getSpanId().toByteArray())).toList();
        for (var trace : List.of(one, two)) {
            OtlpReceiver.Received queue = byName(trace).get("etserve.queue").get(0);
            OtlpReceiver.Received request = byName(trace).get(name).get(0);
            assertThat(queue.parentSpanId()).isEqualTo(request.spanId());
            assertThat(linked).contains(queue.traceId() + "/" + queue.spanId());
            assertThat(queue.span().getEndTimeUnixNano()).isLessThanOrEqualTo(forward.span().getStartTimeUnixNano());
        }
        // The request that did not lead names the forward span it ran in.
        var follower = byName(one).containsKey("etserve.forward") ? two : one;
        OtlpReceiver.Received queue = byName(follower).get("etserve.queue").get(0);
        assertThat(queue.attribute("etserve.batch.size")).isEqualTo("2");
        assertThat(queue.attribute("etserve.batch.trace_id")).isEqualTo(forward.traceId());
        assertThat(queue.attribute("etserve.batch.span_id")).isEqualTo(forward.spanId());
    }

    @Test
    void aCallWithoutACallerTraceIsNotSampledAtRatioZeroAndAFailedCallIsTracedWithItsStatus() throws Exception {
        Http.Response unsampled = restInfer("demo-portable", DEMO_INPUT, null);
        assertThat(unsampled.status()).isEqualTo(200);
        Matcher m = TRACEPARENT.matcher(unsampled.header("traceparent"));
        assertThat(m.matches()).isTrue();
        assertThat(m.group(3)).as("sampled flag at ratio 0").isEqualTo("00");

        Caller caller = Caller.random();
        Http.Response missing = restInfer("no-such-model", DEMO_INPUT, caller);
        assertThat(missing.status()).isEqualTo(404);
        String spanId = answeredSpanId(missing.header("traceparent"), caller);
        String name = "POST /v2/models/{model}/infer";
        var spans = OTLP.awaitTrace(caller.traceId(), s -> has(s, name), WAIT);
        OtlpReceiver.Received request = byName(spans).get(name).get(0);
        assertThat(request.spanId()).isEqualTo(spanId);
        assertThat(request.attribute("http.response.status_code")).isEqualTo("404");
        // Exported in order: the unsampled call, made first, would be here by now.
        assertThat(OTLP.trace(m.group(1))).isEmpty();
    }
}
