package io.etserve.execution;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.execution.DynamicBatcher;
import io.etserve.execution.InferenceObserver;
import io.etserve.execution.InferenceService;
import io.etserve.execution.LoadedModel;
import io.etserve.execution.ModelAdmission;
import io.etserve.inference.DataType;
import io.etserve.inference.InferenceFailedException;
import io.etserve.inference.InferenceRequest;
import io.etserve.inference.InferenceResponse;
import io.etserve.inference.InvalidInputException;
import io.etserve.inference.ModelUnavailableException;
import io.etserve.inference.Tensor;
import io.etserve.metrics.TritonMetrics;
import io.etserve.repository.CpuModelLoaders;
import io.etserve.repository.ModelRegistry;
import io.etserve.repository.ModelVersionState;
import io.etserve.runtime.DirectBufferPool;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Dynamic batching on the real runtime: the dynamic-batch test program (an XNNPACK MLP exported
 * with batch 1..32) under several config.yml policies, through the real loader, the real
 * InferenceService and Triton's metrics. Outputs are checked against the PyTorch references
 * written at export, row for row, whichever batch a request ran in.
 */
class DynamicBatchingTest {

    static final Reference REF = Reference.load(TestPaths.testModels().resolve("dynamic-batch/1/reference.json"));
    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-batching-")
            // Goes as soon as 12 rows are queued; otherwise waits (long) for company.
            .copy(TestPaths.testModels(), "dynamic-batch", "twelve")
            .withFile("twelve/config.yml", config("max-batch-size: 32\n  max-queue-delay: 5s\n  preferred-batch-sizes: [12]"))
            // A lone request waits out 200 ms.
            // As twelve, for services of the tests' own (their admission and fault listener).
            .copy(TestPaths.testModels(), "dynamic-batch", "own")
            .withFile("own/config.yml",
                    config("max-batch-size: 32\n  max-queue-delay: 5s\n  preferred-batch-sizes: [12]"))
            .copy(TestPaths.testModels(), "dynamic-batch", "burst")
            .withFile("burst/config.yml", config("max-batch-size: 32\n  max-queue-delay: 5s\n  preferred-batch-sizes: [12]"))
            .copy(TestPaths.testModels(), "dynamic-batch", "patient")
            .withFile("patient/config.yml", config("max-batch-size: 32\n  max-queue-delay: 200ms"))
            // Batches of at most 4 rows; a 32-row request runs alone.
            .copy(TestPaths.testModels(), "dynamic-batch", "small")
            .withFile("small/config.yml", config("max-batch-size: 4\n  max-queue-delay: 0"))
            // Refused at load: over the program's bound, and a model whose batch dimension is static.
            .copy(TestPaths.testModels(), "dynamic-batch", "over-bound")
            .withFile("over-bound/config.yml", config("max-batch-size: 64"))
            .copy(TestPaths.demoModels(), "demo-portable", "static")
            .withFile("static/config.yml", "dynamic-batching: { max-batch-size: 8 }\n");

    static String config(String batching) {
        return "inputs: [ { name: x, dims: [-1, 16] } ]\noutputs: [ { name: y } ]\ninstances: 2\n"
                + "dynamic-batching:\n  " + batching + "\n";
    }

    static ModelRegistry registry;
    static SimpleMeterRegistry meters;
    static TritonMetrics metrics;
    static InferenceService service;
    final ExecutorService callers = Executors.newCachedThreadPool();

    @BeforeAll
    static void load() {
        meters = new SimpleMeterRegistry();
        metrics = new TritonMetrics(meters);
        registry = new ModelRegistry(REPO.root(), CpuModelLoaders.create(), metrics);
        registry.loadAll();
        service = new InferenceService(registry, Duration.ofSeconds(5), metrics, ModelAdmission.UNLIMITED,
                (device, error) -> {}, new DirectBufferPool(1 << 20), InferenceSpans.OFF);
    }

    @AfterAll
    static void close() {
        registry.close();
    }

    @AfterEach
    void stopCallers() {
        callers.shutdownNow();
    }

    static InferenceRequest request(Reference.TensorValue x) {
        return new InferenceRequest(null, Map.of(), List.of(new Tensor("x", DataType.FP32, x.shape(), x.bytes())),
                List.of(), false);
    }

    /** The request's outputs against the reference case they came from, element by element. */
    static void assertMatches(InferenceResponse r, Reference.Case c) {
        Tensor y = r.outputs().get(0);
        Reference.TensorValue want = c.outputs().get(0);
        assertThat(y.shape()).containsExactly(want.shape());
        ByteBuffer data = y.data();
        assertThat(data.remaining()).isEqualTo(4 * want.data().size());
        for (int i = 0; i < want.data().size(); i++) {
            assertThat(REF.close(data.getFloat(4 * i), want.data().get(i))).as("y[%d]", i).isTrue();
        }
    }

    double gauge(String name, String model) {
        return meters.get(name).tag("model", model).gauge().value();
    }

    Future<InferenceResponse> submit(String model, Reference.Case c) {
        return callers.submit((Callable<InferenceResponse>) () -> service.infer(model, null, request(c.inputs().get(0))));
    }

    @Test
    void joinedRequestsEachGetTheirOwnRowsOfTheReference() throws Exception {
        // 3 x 3 rows + 3 x 1 row = 12 rows: one batch, six requests, outputs cut back per request.
        List<Reference.Case> sent = new ArrayList<>();
        List<Future<InferenceResponse>> answers = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            Reference.Case c = REF.cases().get(i % 2);
            sent.add(c);
            answers.add(submit("twelve", c));
        }
        for (int i = 0; i < 6; i++) {
            assertMatches(answers.get(i).get(30, TimeUnit.SECONDS), sent.get(i));
        }
        // Triton's meanings: requests, inferences by rows, one execution; and the batch size.
        assertThat(gauge("nv_inference_request_success", "twelve")).isEqualTo(6);
        assertThat(gauge("nv_inference_count", "twelve")).isEqualTo(12);
        assertThat(gauge("nv_inference_exec_count", "twelve")).isEqualTo(1);
        var sizes = meters.get("etserve.inference.batch.size").tag("model", "twelve").summary();
        assertThat(sizes.count()).isEqualTo(1);
        assertThat(sizes.totalAmount()).isEqualTo(12);
    }

    /** A service whose admission and fault listener tell {@code heard}; it refuses with {@code refusal} if given. */
    static InferenceService recordingService(List<String> heard, RuntimeException refusal) {
        return new InferenceService(registry, Duration.ofSeconds(5), InferenceObserver.NONE,
                InferenceServiceTest.recording(heard, () -> refusal),
                (device, error) -> heard.add("faults:" + error.getMessage()), new DirectBufferPool(1 << 20),
                InferenceSpans.OFF);
    }

    /** Six requests of twelve rows in all, at once, on {@code svc}: one batch on model 'own'. */
    List<Future<InferenceResponse>> sixTogether(InferenceService svc) {
        List<Future<InferenceResponse>> answers = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            Reference.Case c = REF.cases().get(i % 2);
            answers.add(callers.submit(() -> svc.infer("own", null, request(c.inputs().get(0)))));
        }
        return answers;
    }

    @Test
    void aBatchIsOneAdmittedCallHoweverManyRequestsItServes() throws Exception {
        List<String> heard = new CopyOnWriteArrayList<>();
        List<Future<InferenceResponse>> answers = sixTogether(recordingService(heard, null));
        for (int i = 0; i < 6; i++) {
            assertMatches(answers.get(i).get(30, TimeUnit.SECONDS), REF.cases().get(i % 2));
        }
        assertThat(heard).containsExactly("admit", "breaker:succeeded", "release");
    }

    @Test
    void aBatchThatFailsGivesEveryRequestItsErrorAndTheFaultListenerHearsItOnce() throws Exception {
        List<String> heard = new CopyOnWriteArrayList<>();
        IllegalStateException broken = new IllegalStateException("stream could not be synchronized");
        for (Future<InferenceResponse> a : sixTogether(recordingService(heard, broken))) {
            assertThatThrownBy(() -> a.get(30, TimeUnit.SECONDS)).cause().isInstanceOf(InferenceFailedException.class)
                    .cause().isSameAs(broken);
        }
        assertThat(heard).containsExactly("admit", "faults:stream could not be synchronized");
    }

    @Test
    void aLoneRequestWaitsOutTheDelayForCompanyThenRunsAlone() throws Exception {
        long t0 = System.nanoTime();
        InferenceResponse r = service.infer("patient", null, request(REF.cases().get(0).inputs().get(0)));
        long millis = (System.nanoTime() - t0) / 1_000_000;
        assertMatches(r, REF.cases().get(0));
        assertThat(millis).as("waited for company").isGreaterThanOrEqualTo(195);
        // The wait is queue time, as Triton reports it.
        assertThat(gauge("nv_inference_queue_duration_us", "patient")).isGreaterThanOrEqualTo(195_000);
    }

    @Test
    void aRequestLargerThanABatchRunsAloneAndSmallOnesAreCutAtTheMaximum() throws Exception {
        Reference.Case big = REF.cases().get(2);  // 32 rows
        assertThat(big.inputs().get(0).shape()[0]).isEqualTo(32);
        assertMatches(submit("small", big).get(30, TimeUnit.SECONDS), big);
        List<Future<InferenceResponse>> answers = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            answers.add(submit("small", REF.cases().get(1)));  // 1 row each
        }
        for (Future<InferenceResponse> a : answers) {
            assertMatches(a.get(30, TimeUnit.SECONDS), REF.cases().get(1));
        }
        var sizes = meters.get("etserve.inference.batch.size").tag("model", "small").summary();
        assertThat(sizes.max()).isEqualTo(32);  // the big one, alone
        assertThat(sizes.totalAmount()).isEqualTo(40);
        long upToFour = Arrays.stream(sizes.takeSnapshot().histogramCounts())
                .filter(b -> b.bucket() == 4).mapToLong(b -> (long) b.count()).sum();
        assertThat(upToFour).as("every other batch within max-batch-size").isEqualTo(sizes.count() - 1);
        assertThat(gauge("nv_inference_count", "small")).isEqualTo(40);
    }

    @Test
    void anInvalidRequestIsRefusedBeforeItJoinsAndTheOthersRun() throws Exception {
        Reference.TensorValue x = REF.cases().get(0).inputs().get(0);
        InferenceRequest fp64 = new InferenceRequest(null, Map.of(), List.of(new Tensor("x", DataType.FP64,
                x.shape(), ByteBuffer.allocateDirect(8 * 48))), List.of(), false);
        InferenceRequest tooManyRows = new InferenceRequest(null, Map.of(), List.of(new Tensor("x", DataType.FP32,
                new long[] {33, 16}, ByteBuffer.allocateDirect(4 * 33 * 16))), List.of(), false);
        List<Future<InferenceResponse>> good = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            good.add(submit("burst", REF.cases().get(0)));  // 4 x 3 rows = 12: goes at once
        }
        assertThatThrownBy(() -> service.infer("burst", null, fp64)).isInstanceOf(InvalidInputException.class)
                .hasMessageContaining("FP32");
        assertThatThrownBy(() -> service.infer("burst", null, tooManyRows)).isInstanceOf(InvalidInputException.class)
                .hasMessageContaining("bound 32");
        for (Future<InferenceResponse> a : good) {
            assertMatches(a.get(30, TimeUnit.SECONDS), REF.cases().get(0));
        }
    }

    @Test
    void modelsThatCannotBatchAreRefusedAtLoadWithTheReason() {
        assertThat(registry.resolve("over-bound", null).ready()).isFalse();
        assertThat(registry.resolve("over-bound", null).notReadyReason().orElseThrow()).contains("max-batch-size 64").contains("at most 32 rows");
        assertThat(registry.resolve("static", null).ready()).isFalse();
        assertThat(registry.resolve("static", null).notReadyReason().orElseThrow()).contains("dimension 0 to be dynamic");
    }

    @Test
    void closingRunsEveryQueuedRequestThenRefusesNewOnes() throws Exception {
        ModelRepositoryFixture repo = ModelRepositoryFixture.create("etserve-batching-close-")
                .copy(TestPaths.testModels(), "dynamic-batch", "waiting")
                .withFile("waiting/config.yml", config("max-batch-size: 32\n  max-queue-delay: 10s"));
        ModelRegistry own = new ModelRegistry(repo.root(), CpuModelLoaders.create(), InferenceObserver.NONE);
        own.loadAll();
        InferenceService svc = new InferenceService(own, Duration.ofSeconds(5), InferenceObserver.NONE,
                ModelAdmission.UNLIMITED, (device, error) -> {}, new DirectBufferPool(1 << 20), InferenceSpans.OFF);
        LoadedModel model = ((ModelVersionState.Ready) own.resolve("waiting", null)).model();
        List<Future<InferenceResponse>> answers = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            Reference.Case c = REF.cases().get(i % 2);
            answers.add(callers.submit(() -> svc.infer("waiting", null, request(c.inputs().get(0)))));
        }
        long waitUntil = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (model.batcher().orElseThrow().queued() < 3 && System.nanoTime() < waitUntil) {
            Thread.sleep(5);
        }
        assertThat(model.batcher().orElseThrow().queued()).isEqualTo(3);
        // The delay (10 s, the most config.yml allows) is not waited out: the queued requests run
        // now. The guard is a hang guard set short of the delay, not a speed bound.
        assertThat(CompletableFuture.runAsync(own::close)).succeedsWithin(Duration.ofSeconds(8));
        for (int i = 0; i < 3; i++) {
            assertMatches(answers.get(i).get(60, TimeUnit.SECONDS), REF.cases().get(i % 2));
        }
        assertThatThrownBy(() -> model.batcher().orElseThrow().submit(new DynamicBatcher.Member(List.of(), 1,
                null, Duration.ZERO, Duration.ZERO))).isInstanceOf(ModelUnavailableException.class);
    }
}
