package io.etserve.resilience;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.EtServeApplication;
import io.etserve.grpc.GrpcServer;
import io.etserve.grpc.protocol.GRPCInferenceServiceGrpc;
import io.etserve.grpc.protocol.ModelReadyRequest;
import io.etserve.grpc.protocol.ModelReadyResponse;
import io.etserve.grpc.protocol.ServerLiveRequest;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.TestPaths;
import io.grpc.CallOptions;
import io.grpc.ClientCall;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Status;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.web.server.context.WebServerApplicationContext;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * Shutdown under load: readiness goes first, admitted requests finish, then Modules and streams
 * are freed. Every request the server completed must reach its client; every other request
 * must be refused cleanly (connection refused or 503), never cut off.
 */
class GracefulShutdownTest {

    static final String REQUEST_BODY =
            "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[2],\"data\":[0,150]}]}";

    enum Result { OK, REFUSED, UNAVAILABLE, LOST }

    /** One request on its own connection: a refused connection is not a lost request. */
    static Result send(int port) {
        try (Socket s = new Socket()) {
            try {
                s.connect(new InetSocketAddress("127.0.0.1", port), 2000);
            } catch (ConnectException e) {
                return Result.REFUSED;
            }
            s.setSoTimeout(30_000);
            byte[] body = REQUEST_BODY.getBytes(StandardCharsets.UTF_8);
            String head = "POST /v2/models/caller-stream-probe/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    + "Content-Type: application/json\r\nConnection: close\r\nContent-Length: " + body.length + "\r\n\r\n";
            OutputStream out = s.getOutputStream();
            out.write(head.getBytes(StandardCharsets.US_ASCII));
            out.write(body);
            out.flush();
            InputStream in = s.getInputStream();
            String response = new String(in.readAllBytes(), StandardCharsets.UTF_8);
            if (response.startsWith("HTTP/1.1 200") && response.contains("\"observed\"")) {
                return Result.OK;
            }
            if (response.startsWith("HTTP/1.1 503")) {
                // Refused while draining: fine, if it tells the client when to retry.
                return response.toLowerCase(Locale.ROOT).contains("\r\nretry-after:") ? Result.UNAVAILABLE
                        : Result.LOST;
            }
            return response.isEmpty() ? Result.REFUSED : Result.LOST;
        } catch (IOException e) {
            return Result.LOST;
        }
    }

    @Test
    void noAdmittedRequestIsLost() throws Exception {
        ModelRepositoryFixture repo = ModelRepositoryFixture.create("etserve-shutdown-")
                .copy(TestPaths.testModels(), "caller-stream-probe");
        repo.withFile("caller-stream-probe/config.yml",
                "inputs: [ { name: x } ]\noutputs: [ { name: observed } ]\ninstances: 4\nplacement: gpu\n");
        ConfigurableApplicationContext ctx = new SpringApplicationBuilder(EtServeApplication.class).run(
                "--server.port=0", "--management.server.port=0",
                "--etserve.model-repository=" + repo.root(),
                "--etserve.native.extra-libraries=" + TestPaths.probeDelegate(),
                "--spring.lifecycle.timeout-per-shutdown-phase=20s");
        int port = ((WebServerApplicationContext) ctx).getWebServer().getPort();
        MeterRegistry meters = ctx.getBean(MeterRegistry.class);

        AtomicBoolean stop = new AtomicBoolean();
        AtomicInteger[] counts = new AtomicInteger[Result.values().length];
        for (int i = 0; i < counts.length; i++) {
            counts[i] = new AtomicInteger();
        }
        ExecutorService clients = Executors.newFixedThreadPool(6);
        List<Future<?>> fs = new ArrayList<>();
        for (int t = 0; t < 6; t++) {
            fs.add(clients.submit(() -> {
                while (!stop.get()) {
                    Result r = send(port);
                    counts[r.ordinal()].incrementAndGet();
                    if (r == Result.REFUSED) {
                        return; // the server has stopped listening
                    }
                }
                return;
            }));
        }
        Thread.sleep(1000);
        // Held across close: the series are unregistered when the model unloads.
        List<Gauge> successGauges = List.copyOf(meters.find("nv_inference_request_success").gauges());
        double completedBeforeClose = successes(successGauges);
        ctx.close(); // what SIGTERM does: graceful shutdown of the web server, then the beans
        stop.set(true);
        for (Future<?> f : fs) {
            f.get(60, TimeUnit.SECONDS);
        }
        clients.shutdown();

        double served = successes(successGauges);
        assertThat(completedBeforeClose).isGreaterThan(0);
        assertThat(counts[Result.LOST.ordinal()].get()).as("requests cut off").isZero();
        // Every request the server completed reached its client as a correct 200.
        assertThat((double) counts[Result.OK.ordinal()].get()).isEqualTo(served);
    }

    @Test
    void restAndGrpcDrainAtOnce() throws Exception {
        ModelRepositoryFixture repo = ModelRepositoryFixture.create("etserve-shutdown-both-")
                .copy(TestPaths.demoModels(), "demo-portable");
        ConfigurableApplicationContext ctx = new SpringApplicationBuilder(EtServeApplication.class).run(
                "--server.port=0", "--management.server.port=0", "--etserve.grpc.port=0",
                "--etserve.model-repository=" + repo.root(),
                "--spring.lifecycle.timeout-per-shutdown-phase=60s");
        int port = ((WebServerApplicationContext) ctx).getWebServer().getPort();
        ManagedChannel channel = Grpc.newChannelBuilderForAddress("127.0.0.1", ctx.getBean(GrpcServer.class).port(),
                InsecureChannelCredentials.create()).build();
        ExecutorService closing = Executors.newSingleThreadExecutor();
        try {
            // A gRPC call in flight that the client never half-closes: the gRPC drain waits for it.
            CompletableFuture<Status> held = new CompletableFuture<>();
            ClientCall<ModelReadyRequest, ModelReadyResponse> call = channel.newCall(
                    GRPCInferenceServiceGrpc.getModelReadyMethod(), CallOptions.DEFAULT);
            call.start(new ClientCall.Listener<>() {
                @Override
                public void onClose(Status status, Metadata trailers) {
                    held.complete(status);
                }
            }, new Metadata());
            call.request(1);
            call.sendMessage(ModelReadyRequest.newBuilder().setName("demo-portable").build());
            // Answered on the same connection after it, so the server has the held call now (sent
            // is not arrived: a server closed before it came would refuse it, not drain it).
            assertThat(GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(30, TimeUnit.SECONDS)
                    .serverLive(ServerLiveRequest.getDefaultInstance()).getLive()).isTrue();
            assertThat(readinessOf(port)).isEqualTo(200);

            Future<?> closed = closing.submit(ctx::close);
            // The web server's graceful shutdown (it stops accepting connections) must begin
            // while the gRPC call still holds its drain (up to the 60 s phase timeout), not after
            // it. Readiness answers 503 before either: that is not the shutdown of the port.
            long guard = System.nanoTime() + TimeUnit.SECONDS.toNanos(50);
            while (readinessOf(port) != 0) {
                assertThat(System.nanoTime()).as("REST still took connections").isLessThan(guard);
                Thread.sleep(5);
            }
            assertThat(held).as("the gRPC call was ended before REST began to drain").isNotDone();
            call.cancel("done", null);
            closed.get(60, TimeUnit.SECONDS);
        } finally {
            channel.shutdownNow();
            closing.shutdownNow();
            if (ctx.isActive()) {
                ctx.close();
            }
        }
    }

    /** The readiness probe's status on a new connection; 0 when the connection is refused or cut. */
    private static int readinessOf(int port) {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress("127.0.0.1", port), 2000);
            s.setSoTimeout(10_000);
            s.getOutputStream().write(("GET /v2/health/ready HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                    .getBytes(StandardCharsets.US_ASCII));
            String response = new String(s.getInputStream().readAllBytes(), StandardCharsets.US_ASCII);
            return response.length() >= 12 ? Integer.parseInt(response.substring(9, 12)) : 0;
        } catch (IOException | NumberFormatException e) {
            return 0;
        }
    }

    private static double successes(List<Gauge> gauges) {
        return gauges.stream().mapToDouble(Gauge::value).sum();
    }
}
