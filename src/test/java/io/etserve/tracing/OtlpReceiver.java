package io.etserve.tracing;

import com.sun.net.httpserver.HttpServer;
import io.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
import io.opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse;
import io.opentelemetry.proto.common.v1.AnyValue;
import io.opentelemetry.proto.common.v1.KeyValue;
import io.opentelemetry.proto.trace.v1.ResourceSpans;
import io.opentelemetry.proto.trace.v1.ScopeSpans;
import io.opentelemetry.proto.trace.v1.Span;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Predicate;
import java.util.zip.GZIPInputStream;

/**
 * An OTLP/HTTP trace receiver on a real socket (what a collector's port 4318 answers on
 * {@code /v1/traces}): it decodes each export with the protocol's own messages
 * ({@code opentelemetry-proto}) and keeps the spans.
 */
final class OtlpReceiver implements AutoCloseable {

    /** A received span with its resource's service name. */
    record Received(String service, Span span) {
        String traceId() {
            return HexFormat.of().formatHex(span.getTraceId().toByteArray());
        }

        String spanId() {
            return HexFormat.of().formatHex(span.getSpanId().toByteArray());
        }

        String parentSpanId() {
            return HexFormat.of().formatHex(span.getParentSpanId().toByteArray());
        }

        String name() {
            return span.getName();
        }

        /** An attribute as text (ints and strings alike), null when absent. */
        String attribute(String key) {
            for (KeyValue kv : span.getAttributesList()) {
                if (kv.getKey().equals(key)) {
                    AnyValue v = kv.getValue();
                    return switch (v.getValueCase()) {
                        case STRING_VALUE -> v.getStringValue();
                        case INT_VALUE -> Long.toString(v.getIntValue());
                        case BOOL_VALUE -> Boolean.toString(v.getBoolValue());
                        case DOUBLE_VALUE -> Double.toString(v.getDoubleValue());
                        default -> v.toString();
                    };
                }
            }
            return null;
        }
    }

    private final HttpServer server;
    private final List<Received> spans = new CopyOnWriteArrayList<>();
    private final AtomicInteger exports = new AtomicInteger();

    private OtlpReceiver(HttpServer server) {
        this.server = server;
    }

    static OtlpReceiver start() {
        try {
            HttpServer server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
            OtlpReceiver receiver = new OtlpReceiver(server);
            server.createContext("/v1/traces", exchange -> {
                try (exchange) {
                    InputStream in = exchange.getRequestBody();
                    if ("gzip".equalsIgnoreCase(exchange.getRequestHeaders().getFirst("Content-Encoding"))) {
                        in = new GZIPInputStream(in);
                    }
                    ExportTraceServiceRequest export = ExportTraceServiceRequest.parseFrom(in.readAllBytes());
                    receiver.exports.incrementAndGet();
                    for (ResourceSpans rs : export.getResourceSpansList()) {
                        String service = rs.getResource().getAttributesList().stream()
                                .filter(kv -> kv.getKey().equals("service.name"))
                                .map(kv -> kv.getValue().getStringValue()).findFirst().orElse(null);
                        for (ScopeSpans ss : rs.getScopeSpansList()) {
                            ss.getSpansList().forEach(s -> receiver.spans.add(new Received(service, s)));
                        }
                    }
                    byte[] answer = ExportTraceServiceResponse.getDefaultInstance().toByteArray();
                    exchange.getResponseHeaders().add("Content-Type", "application/x-protobuf");
                    exchange.sendResponseHeaders(200, answer.length == 0 ? -1 : answer.length);
                    exchange.getResponseBody().write(answer);
                }
            });
            server.start();
            return receiver;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    String endpoint() {
        return "http://127.0.0.1:" + server.getAddress().getPort() + "/v1/traces";
    }

    /** Export requests received so far. */
    int exports() {
        return exports.get();
    }

    List<Received> trace(String traceId) {
        return spans.stream().filter(s -> s.traceId().equals(traceId)).toList();
    }

    /** The spans of {@code traceId} once {@code complete} holds for them, or an error after {@code timeout}. */
    List<Received> awaitTrace(String traceId, Predicate<List<Received>> complete, Duration timeout)
            throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            List<Received> got = trace(traceId);
            if (complete.test(got)) {
                return got;
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError("trace " + traceId + " incomplete after " + timeout + ": "
                        + got.stream().map(Received::name).toList());
            }
            Thread.sleep(20);
        }
    }

    @Override
    public void close() {
        server.stop(0);
    }
}
