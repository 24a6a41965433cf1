package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import io.etserve.grpc.GrpcServer;
import io.etserve.grpc.protocol.GRPCInferenceServiceGrpc;
import io.etserve.grpc.protocol.InferParameter;
import io.etserve.grpc.protocol.InferTensorContents;
import io.etserve.grpc.protocol.ModelInferRequest;
import io.etserve.grpc.protocol.ModelInferResponse;
import io.etserve.repository.ModelRegistry;
import io.etserve.support.Http;
import io.etserve.support.InlineCalls;
import io.etserve.support.ModelActivity;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.RawConnection;
import io.etserve.support.TestPaths;
import io.grpc.Context;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.assertj.core.api.SoftAssertions;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Work nobody waits for is not done, over real HTTP and gRPC: a request whose client goes (a
 * closed connection, a cancelled call, a passed deadline) while it waits for an instance or a
 * batch never runs, and the protocol's {@code timeout} parameter ends a wait as Triton does. The
 * probe program holds its one instance as long as asked; the forward-call count
 * ({@code nv_inference_exec_count}) shows what ran. Once a client gave up on a line, the line
 * serves its newest waiter first ({@code etserve.inference.queue-policy}; here for 60 s after a
 * give-up, so that a slow machine cannot end it mid-test).
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class CancellationApiTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-cancel-")
            .withSlowProbe("slow")
            .withSlowProbe("patient")
            .withSlowProbe("impatient")
            .copy(TestPaths.testModels(), "batched-probe", "slow-batched")
            .withFile("slow-batched/config.yml", "inputs: [ { name: x, dims: [-1, 2] } ]\noutputs: [ { name: observed } ]\n"
                    + "instances: 1\ndynamic-batching: { max-batch-size: 8, max-queue-delay: 20ms }\n");

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("etserve.native.extra-libraries", () -> TestPaths.probeDelegate().toString());
        r.add("etserve.inference.queue-timeout", () -> "20s");  // only the client ends a wait here
        r.add("etserve.inference.queue-policy.give-up-window", () -> "60s");
        InlineCalls.off(r);
        r.add("management.server.port", () -> "0");
    }

    @Value("${local.server.port}")
    int port;

    @Autowired
    ModelRegistry registry;

    @Value("${local.management.port}")
    int managementPort;

    @Autowired
    GrpcServer grpcServer;

    ManagedChannel channel;

    @BeforeEach
    void connect() {
        channel = Grpc.newChannelBuilderForAddress("127.0.0.1", grpcServer.port(), InsecureChannelCredentials.create())
                .build();
    }

    @AfterEach
    void disconnect() throws InterruptedException {
        channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    }

    static String probe(float hostMillis) {
        return "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[2],\"data\":[0," + hostMillis + "]}]}";
    }

    static String batchedProbe(float hostMillis) {
        return "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2],\"data\":[0," + hostMillis + "]}]}";
    }

    static ModelInferRequest grpcProbe(float hostMillis, long timeoutMicros) {
        ModelInferRequest.Builder req = ModelInferRequest.newBuilder().setModelName("slow");
        req.addInputsBuilder().setName("x").setDatatype("FP32").addShape(2)
                .setContents(InferTensorContents.newBuilder().addFp32Contents(0).addFp32Contents(hostMillis));
        if (timeoutMicros > 0) {
            req.putParameters("timeout", InferParameter.newBuilder().setInt64Param(timeoutMicros).build());
        }
        return req.build();
    }

    /** A series' value on the management port's Prometheus page (0 when absent). */
    double metric(String name, String... labels) {
        String page = Http.local(managementPort).get("/actuator/prometheus").text();
        for (String line : page.split("\n")) {
            if (!line.startsWith(name + "{")) {
                continue;
            }
            String series = line.substring(0, line.lastIndexOf('}') + 1);
            boolean all = true;
            for (String label : labels) {
                all &= series.contains(label);
            }
            if (all) {
                return Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
            }
        }
        return 0;
    }

    double forwardCalls(String model) {
        return metric("nv_inference_exec_count", "model=\"" + model + "\"");
    }

    double cancelled(String model, String stage, String reason) {
        return metric("etserve_inference_cancelled_total", "model=\"" + model + "\"", "stage=\"" + stage + "\"",
                "reason=\"" + reason + "\"");
    }

    /** Waits until the model has {@code n} requests waiting or running. */
    void awaitPending(String model, int n) throws InterruptedException {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (metric("nv_inference_pending_request_count", "model=\"" + model + "\"") != n
                && System.nanoTime() < until) {
            Thread.sleep(10);
        }
        assertThat(metric("nv_inference_pending_request_count", "model=\"" + model + "\"")).isEqualTo(n);
    }

    void awaitMetric(double expected, String name, String... labels) throws InterruptedException {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (metric(name, labels) != expected && System.nanoTime() < until) {
            Thread.sleep(10);
        }
        assertThat(metric(name, labels)).as(name + " " + String.join(",", labels)).isEqualTo(expected);
    }

    /** Whether the model's waiting and running requests fall to {@code n} within {@code millis}. */
    boolean pendingFallsTo(String model, int n, long millis) throws InterruptedException {
        long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
        while (System.nanoTime() < until) {
            if (metric("nv_inference_pending_request_count", "model=\"" + model + "\"") == n) {
                return true;
            }
            Thread.sleep(10);
        }
        return false;
    }

    /** Holds the slow model's only instance with {@code body}'s call; returns once the call runs. */
    CompletableFuture<Http.Response> hold(String model, String body) throws InterruptedException {
        CompletableFuture<Http.Response> held = CompletableFuture.supplyAsync(
                () -> Http.local(port).post("/v2/models/" + model + "/infer", body));
        awaitPending(model, 1);
        ModelActivity.awaitNoIdleInstance(registry, model);
        return held;
    }

    @Test
    void anHttpClientThatClosesWhileItsRequestWaitsForAnInstanceNeverHasItRun() throws Exception {
        Http http = Http.local(port);
        assertThat(http.post("/v2/models/slow/infer", probe(0)).status()).isEqualTo(200);  // warm
        double calls = forwardCalls("slow");
        double dropped = cancelled("slow", "queue", "client");
        CompletableFuture<Http.Response> held = hold("slow", probe(1500));
        try (RawConnection client = RawConnection.open(port, 10_000)) {
            client.send(RawConnection.post("/v2/models/slow/infer", probe(0)));
            awaitPending("slow", 2);  // it waits for the instance
        }  // and its client goes
        boolean leftAtOnce = pendingFallsTo("slow", 1, 1000) && !held.isDone();
        assertThat(held.get(30, TimeUnit.SECONDS).status()).isEqualTo(200);
        // The next request runs after anything that was still in line.
        assertThat(http.post("/v2/models/slow/infer", probe(0)).status()).isEqualTo(200);
        SoftAssertions soft = new SoftAssertions();
        soft.assertThat(forwardCalls("slow")).as("forward calls: the held one and the next; never the abandoned one")
                .isEqualTo(calls + 2);
        soft.assertThat(leftAtOnce).as("out of the line while the instance was still held").isTrue();
        soft.assertThat(cancelled("slow", "queue", "client")).as("counted").isEqualTo(dropped + 1);
        soft.assertAll();
    }

    @Test
    void anHttpClientThatClosesWhileItsRequestWaitsForABatchIsLeftOutOfIt() throws Exception {
        Http http = Http.local(port);
        assertThat(http.post("/v2/models/slow-batched/infer", batchedProbe(0)).status()).isEqualTo(200);  // warm
        double calls = forwardCalls("slow-batched");
        double rows = metric("nv_inference_count", "model=\"slow-batched\"");
        double dropped = cancelled("slow-batched", "batch", "client");
        CompletableFuture<Http.Response> held = hold("slow-batched", batchedProbe(1500));  // its batch of one runs
        CompletableFuture<Http.Response> stays;
        try (RawConnection client = RawConnection.open(port, 10_000)) {
            client.send(RawConnection.post("/v2/models/slow-batched/infer", batchedProbe(0)));
            awaitPending("slow-batched", 2);
            stays = CompletableFuture.supplyAsync(() -> http.post("/v2/models/slow-batched/infer", batchedProbe(0)));
            awaitPending("slow-batched", 3);  // both queued for the next batch
        }
        boolean leftAtOnce = pendingFallsTo("slow-batched", 2, 1000) && !held.isDone();
        assertThat(held.get(30, TimeUnit.SECONDS).status()).isEqualTo(200);
        assertThat(stays.get(30, TimeUnit.SECONDS).status()).isEqualTo(200);
        SoftAssertions soft = new SoftAssertions();
        soft.assertThat(metric("nv_inference_count", "model=\"slow-batched\""))
                .as("rows run: the held one and the one that stayed, never the abandoned one").isEqualTo(rows + 2);
        soft.assertThat(forwardCalls("slow-batched")).isEqualTo(calls + 2);
        soft.assertThat(leftAtOnce).as("out of the queue while the instance was still held").isTrue();
        soft.assertThat(cancelled("slow-batched", "batch", "client")).as("counted").isEqualTo(dropped + 1);
        soft.assertAll();
    }

    @Test
    void theTimeoutParameterEndsTheWaitWithTritons503() throws Exception {
        Http http = Http.local(port);
        double calls = forwardCalls("slow");
        double expired = cancelled("slow", "queue", "timeout");
        CompletableFuture<Http.Response> held = hold("slow", probe(1500));
        String withTimeout = probe(0).replace("{\"inputs\"", "{\"parameters\":{\"timeout\":200000},\"inputs\"");
        long t0 = System.nanoTime();
        Http.Response r = http.post("/v2/models/slow/infer", withTimeout);
        long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        assertThat(r.status()).as(r.text()).isEqualTo(503);
        assertThat(r.text()).contains("request timeout expired").contains("200000 us");
        assertThat(millis).as("not before its 200 ms").isGreaterThanOrEqualTo(190L);
        assertThat(held.isDone()).as("at its 200 ms, not when the instance came free").isFalse();
        assertThat(cancelled("slow", "queue", "timeout")).isEqualTo(expired + 1);
        assertThat(held.get(30, TimeUnit.SECONDS).status()).isEqualTo(200);
        assertThat(forwardCalls("slow")).isEqualTo(calls + 1);
    }

    @Test
    void aCancelledGrpcCallNeverRuns() throws Exception {
        GRPCInferenceServiceGrpc.newBlockingStub(channel).modelInfer(grpcProbe(0, 0));  // warm
        double calls = forwardCalls("slow");
        double dropped = cancelled("slow", "queue", "client");
        CompletableFuture<Http.Response> held = hold("slow", probe(1500));
        Context.CancellableContext call = Context.current().withCancellation();
        Future<ModelInferResponse> answer = call.call(
                () -> GRPCInferenceServiceGrpc.newFutureStub(channel).modelInfer(grpcProbe(0, 0)));
        awaitPending("slow", 2);
        call.cancel(null);
        boolean leftAtOnce = pendingFallsTo("slow", 1, 1000) && !held.isDone();
        assertThat(answer.isDone()).isTrue();
        assertThat(held.get(30, TimeUnit.SECONDS).status()).isEqualTo(200);
        assertThat(Http.local(port).post("/v2/models/slow/infer", probe(0)).status()).isEqualTo(200);
        SoftAssertions soft = new SoftAssertions();
        soft.assertThat(forwardCalls("slow")).as("forward calls: the held one and the next; never the cancelled one")
                .isEqualTo(calls + 2);
        soft.assertThat(leftAtOnce).as("out of the line while the instance was still held").isTrue();
        soft.assertThat(cancelled("slow", "queue", "client")).as("counted").isEqualTo(dropped + 1);
        soft.assertAll();
    }

    @Test
    void aGrpcCallPastItsDeadlineNeverRuns() throws Exception {
        // Warm: a cold JVM's first call could spend its 300 ms before it reaches the service.
        GRPCInferenceServiceGrpc.newBlockingStub(channel).modelInfer(grpcProbe(0, 0));
        double calls = forwardCalls("slow");
        double dropped = cancelled("slow", "queue", "deadline");
        CompletableFuture<Http.Response> held = hold("slow", probe(1500));
        StatusRuntimeException e = catchThrowableOfType(StatusRuntimeException.class,
                () -> GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(300, TimeUnit.MILLISECONDS)
                        .modelInfer(grpcProbe(0, 0)));
        assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.DEADLINE_EXCEEDED);
        boolean leftAtOnce = pendingFallsTo("slow", 1, 1000) && !held.isDone();
        assertThat(held.get(30, TimeUnit.SECONDS).status()).isEqualTo(200);
        assertThat(Http.local(port).post("/v2/models/slow/infer", probe(0)).status()).isEqualTo(200);
        SoftAssertions soft = new SoftAssertions();
        soft.assertThat(forwardCalls("slow")).as("forward calls: the held one and the next; never the late one")
                .isEqualTo(calls + 2);
        soft.assertThat(leftAtOnce).as("out of the line while the instance was still held").isTrue();
        soft.assertThat(cancelled("slow", "queue", "deadline")).as("counted").isEqualTo(dropped + 1);
        soft.assertAll();
    }

    @Test
    void theGrpcTimeoutParameterEndsTheWaitWithTritonsUnavailable() throws Exception {
        CompletableFuture<Http.Response> held = hold("slow", probe(1500));
        long t0 = System.nanoTime();
        StatusRuntimeException e = catchThrowableOfType(StatusRuntimeException.class,
                () -> GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(30, TimeUnit.SECONDS)
                        .modelInfer(grpcProbe(0, 200_000)));
        assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.UNAVAILABLE);
        assertThat(e.getStatus().getDescription()).contains("request timeout expired");
        assertThat(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0)).as("not before its 200 ms").isGreaterThanOrEqualTo(190);
        assertThat(held.isDone()).as("at its 200 ms, not when the instance came free").isFalse();
        assertThat(held.get(30, TimeUnit.SECONDS).status()).isEqualTo(200);
    }

    @Test
    void aGrpcCallCancelledWhileItRunsFinishesAndItsOutputsAreDiscarded() throws Exception {
        double calls = forwardCalls("slow");
        double discarded = cancelled("slow", "execution", "client");
        Context.CancellableContext call = Context.current().withCancellation();
        call.call(() -> GRPCInferenceServiceGrpc.newFutureStub(channel).modelInfer(grpcProbe(800, 0)));
        awaitPending("slow", 1);
        call.cancel(null);
        awaitMetric(discarded + 1, "etserve_inference_cancelled_total", "model=\"slow\"", "stage=\"execution\"",
                "reason=\"client\"");
        assertThat(forwardCalls("slow")).as("a running call is never interrupted").isEqualTo(calls + 1);
    }

    /**
     * Requests that join {@code model}'s line one after another (each once the one before waits
     * behind the {@code ahead} requests already there), each holding the instance 200 ms; their
     * names in the order they were answered.
     */
    List<String> answerOrder(String model, int ahead, String... names) throws Exception {
        List<String> answered = new CopyOnWriteArrayList<>();
        ExecutorService clients = Executors.newFixedThreadPool(names.length);
        try {
            List<Future<?>> calls = new ArrayList<>();
            for (int i = 0; i < names.length; i++) {
                String name = names[i];
                calls.add(clients.submit(() -> {
                    Http.Response r = Http.local(port).post("/v2/models/" + model + "/infer", probe(200));
                    answered.add(r.status() == 200 ? name : name + " " + r.status());
                }));
                awaitPending(model, ahead + i + 1);
            }
            for (Future<?> call : calls) {
                call.get(30, TimeUnit.SECONDS);
            }
        } finally {
            clients.shutdownNow();
        }
        return answered;
    }

    @Test
    void whileNobodyGivesUpTheInstanceLineServesInArrivalOrder() throws Exception {
        CompletableFuture<Http.Response> held = hold("patient", probe(1500));
        List<String> answered = answerOrder("patient", 1, "first", "second", "third");
        assertThat(held.get(30, TimeUnit.SECONDS).status()).isEqualTo(200);
        assertThat(answered).containsExactly("first", "second", "third");
    }

    @Test
    void onceAClientGaveUpOnTheLineItsNewestWaiterIsServedFirst() throws Exception {
        CompletableFuture<Http.Response> held = hold("impatient", probe(1500));
        try (RawConnection client = RawConnection.open(port, 10_000)) {
            client.send(RawConnection.post("/v2/models/impatient/infer", probe(0)));
            awaitPending("impatient", 2);
        }  // and its client goes
        assertThat(pendingFallsTo("impatient", 1, 5000)).as("it left the line").isTrue();
        List<String> answered = answerOrder("impatient", 1, "first", "second", "third");
        assertThat(held.get(30, TimeUnit.SECONDS).status()).isEqualTo(200);
        // Each answered request gives the instance to the newest of those still waiting.
        assertThat(answered).containsExactly("third", "second", "first");
    }
}
