package io.etserve.bench;

import java.util.concurrent.TimeUnit;
import org.eclipse.jetty.http.ComplianceUtils;
import org.eclipse.jetty.http.HttpCompliance;
import org.eclipse.jetty.http.HttpField;
import org.eclipse.jetty.http.HttpFields;
import org.eclipse.jetty.http.HttpHeader;
import org.eclipse.jetty.http.HttpURI;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Jetty's own check of every request's head ({@code ComplianceUtils.verify}, which Jetty runs
 * before any handler, the service's {@code InferHandler} included): what part of a small
 * request's heap and time is Jetty's alone, out of the service's reach (issue 26's 2 KB goal,
 * bench/results/2026-12-06-2core-jetty-request-checks.md). The heads are those of an inference
 * call as {@code wrk} and {@code curl} send it, to the host and port Jetty put in the request's
 * URI, so no check fails.
 *
 * <p>Run: {@code java -cp <test classpath> org.openjdk.jmh.Main JettyRequestChecksBenchmark -prof gc}
 * ({@code gc.alloc.rate.norm}: bytes per check).
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(1)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@State(Scope.Benchmark)
public class JettyRequestChecksBenchmark {

    @Param({"wrk", "curl"})
    public String client;

    private HttpURI uri;
    private HttpFields headers;

    @Setup
    public void head() {
        uri = HttpURI.build().scheme("http").host("127.0.0.1").port(8080).path("/v2/models/demo-xnnpack/infer")
                .asImmutable();
        HttpFields.Mutable fields = HttpFields.build().add(new HttpField(HttpHeader.HOST, "127.0.0.1:8080"));
        if (client.equals("curl")) {
            fields.add(new HttpField(HttpHeader.USER_AGENT, "curl/8.5.0")).add(new HttpField(HttpHeader.ACCEPT, "*/*"));
        }
        headers = fields.add(new HttpField(HttpHeader.CONTENT_TYPE, "application/json"))
                .add(new HttpField(HttpHeader.CONTENT_LENGTH, "104")).asImmutable();
    }

    @Benchmark
    public HttpFields verify() {
        ComplianceUtils.verify(uri, headers, HttpCompliance.RFC9110, null);
        return headers;
    }
}
