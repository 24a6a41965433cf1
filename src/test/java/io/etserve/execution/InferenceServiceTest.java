package io.etserve.execution;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.inference.Caller;
import io.etserve.inference.DataType;
import io.etserve.inference.InferenceException;
import io.etserve.inference.InferenceFailedException;
import io.etserve.inference.InferenceRequest;
import io.etserve.inference.InferenceResponse;
import io.etserve.inference.InvalidInputException;
import io.etserve.inference.ModelUnavailableException;
import io.etserve.inference.OverloadedException;
import io.etserve.inference.RequestCancelledException;
import io.etserve.inference.Tensor;
import io.etserve.inference.WouldWaitException;
import io.etserve.repository.CpuModelLoaders;
import io.etserve.repository.ModelLoader;
import io.etserve.repository.ModelRegistry;
import io.etserve.repository.ModelVersionState;
import io.etserve.runtime.DirectBufferPool;
import io.etserve.runtime.OutputBuffers;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * InferenceService on the real runtime (demo-portable, loaded by the real ModelLoader, CPU), with
 * recording admission, observer and fault listener: every call ends in exactly one outcome, and
 * that outcome decides what the breaker, the metrics and the fault listener hear.
 */
class InferenceServiceTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-service-")
            .copy(TestPaths.demoModels(), "demo-portable");
    static ModelRegistry registry;

    final List<String> heard = new ArrayList<>();
    RuntimeException admitFails;
    long queueNanos = -1;

    @BeforeAll
    static void load() {
        ModelLoader loader = CpuModelLoaders.create();
        registry = new ModelRegistry(REPO.root(), loader, InferenceObserver.NONE);
        registry.loadAll();
    }

    @AfterAll
    static void close() {
        registry.close();
    }

    InferenceService service() {
        InferenceObserver observer = new InferenceObserver() {
            public void pending(String model, String version, int delta) {}

            public void success(String model, String version, long n, long q, long i, long c, long o) {
                heard.add("metrics:success");
                queueNanos = q;
            }

            public void failure(String model, String version, FailureReason reason, long requestNanos) {
                heard.add("metrics:" + reason);
            }

            public void cancelled(String model, String version, RequestCancelledException.Stage stage,
                    RequestCancelledException.Reason reason) {
                heard.add("cancelled:" + stage.label() + "/" + reason.label());
            }
        };
        ModelAdmission admission = recording(heard, () -> admitFails);
        FaultListener faults = (device, error) -> heard.add("faults:" + error.getClass().getSimpleName());
        return new InferenceService(registry, Duration.ofSeconds(1), observer, admission, faults,
                new DirectBufferPool(1 << 20), InferenceSpans.OFF);
    }

    /** An admission that records what the breaker hears; it refuses with what {@code refusal} gives, if anything. */
    static ModelAdmission recording(List<String> heard, Supplier<RuntimeException> refusal) {
        return new ModelAdmission() {
            public Admission admit(LoadedModel model) {
                heard.add("admit");
                RuntimeException refused = refusal.get();
                if (refused != null) {
                    throw refused;
                }
                return new Admission() {
                    public void succeeded(long nanos) {
                        heard.add("breaker:succeeded");
                    }

                    public void failed(long nanos, InferenceFailedException error) {
                        heard.add("breaker:failed");
                    }

                    public void ignored() {
                        heard.add("breaker:ignored");
                    }

                    public void close() {
                        heard.add("release");
                    }
                };
            }

            public Optional<String> whyNotAdmitting(LoadedModel model) {
                return Optional.empty();
            }
        };
    }

    static InferenceRequest request(Reference.TensorValue x, long[] shape) {
        return request(x, shape, Map.of());
    }

    static InferenceRequest request(Reference.TensorValue x, long[] shape, Map<String, Object> parameters) {
        return new InferenceRequest(null, parameters, List.of(new Tensor("x", DataType.FP32, shape, x.bytes())),
                List.of(), false);
    }

    static Reference.TensorValue input() {
        return Reference.load(TestPaths.demoModels().resolve("demo-portable/1/reference.json")).cases().get(0).inputs()
                .get(0);
    }

    /** Every instance of the model, held by the test: the next request waits in line. */
    static AutoCloseable holdTheInstances() throws InterruptedException {
        InstancePool pool = ((ModelVersionState.Ready) registry.resolve("demo-portable", null)).model().instances();
        List<ExecutionSlot> held = new ArrayList<>();
        for (int i = 0; i < pool.capacity(); i++) {
            held.add(pool.acquire(Duration.ofSeconds(5)));
        }
        return () -> held.forEach(ExecutionSlot::close);
    }

    @Test
    void aGoodCallIsOneSuccessEverywhere() {
        Reference ref = Reference.load(TestPaths.demoModels().resolve("demo-portable/1/reference.json"));
        Reference.TensorValue x = ref.cases().get(0).inputs().get(0);
        InferenceResponse r = service().infer("demo-portable", null, request(x, x.shape()));
        ByteBuffer y = r.outputs().get(0).data();
        List<Double> want = ref.cases().get(0).outputs().get(0).data();
        for (int i = 0; i < want.size(); i++) {
            assertThat(ref.close(y.getFloat(4 * i), want.get(i))).as("y[%d]", i).isTrue();
        }
        assertThat(heard).containsExactly("admit", "breaker:succeeded", "release", "metrics:success");
    }

    @Test
    void aCallRunsAtOnceOnlyWithAnIdleInstanceAndARecentForwardUnderTheBound() throws Exception {
        InferenceService service = service();
        Reference.TensorValue x = input();
        service.infer("demo-portable", null, request(x, x.shape()));  // its forward time is now known

        assertThat(service.runsAtOnce("demo-portable", null, Duration.ofSeconds(1))).isTrue();
        assertThat(service.runsAtOnce("demo-portable", null, Duration.ofNanos(1))).as("slower than the bound").isFalse();
        try (AutoCloseable held = holdTheInstances()) {
            assertThat(service.runsAtOnce("demo-portable", null, Duration.ofSeconds(1))).as("would wait").isFalse();
        }
        assertThat(service.runsAtOnce("no-such-model", null, Duration.ofSeconds(1))).as("an immediate error").isTrue();
    }

    @Test
    void aCallEndsSoonWithARecentForwardUnderTheBoundWhateverItsInstancesDo() throws Exception {
        InferenceService service = service();
        Reference.TensorValue x = input();
        service.infer("demo-portable", null, request(x, x.shape()));  // its forward time is now known

        assertThat(service.endsSoon("demo-portable", null, Duration.ofSeconds(1))).isTrue();
        assertThat(service.endsSoon("demo-portable", null, Duration.ofNanos(1))).as("slower than the bound").isFalse();
        try (AutoCloseable held = holdTheInstances()) {
            // Unlike runsAtOnce: whoever runs it asks for an instance without waiting.
            assertThat(service.endsSoon("demo-portable", null, Duration.ofSeconds(1))).as("instances busy").isTrue();
        }
        assertThat(service.endsSoon("no-such-model", null, Duration.ofSeconds(1))).as("an immediate error").isTrue();
    }

    @Test
    void aCallerThatMayNotWaitRunsOnAFreeInstanceOrIsHandedBackWithNoOutcome() throws Exception {
        InferenceService service = service();
        Reference.TensorValue x = input();
        try (AutoCloseable held = holdTheInstances()) {
            // Not the queue timeout's OverloadedException: it did not wait in line.
            assertThatThrownBy(() -> service.infer("demo-portable", null, request(x, x.shape()),
                    OutputBuffers.ALLOCATE, Caller.AT_ONCE)).isInstanceOf(WouldWaitException.class);
        }
        // Nothing heard of it: no admission, no breaker, no metrics, no fault.
        assertThat(heard).isEmpty();
        InferenceResponse r = service.infer("demo-portable", null, request(x, x.shape()), OutputBuffers.ALLOCATE,
                Caller.AT_ONCE);
        assertThat(r.outputs()).hasSize(1);
        assertThat(heard).containsExactly("admit", "breaker:succeeded", "release", "metrics:success");
    }

    @Test
    void aBadShapeIsRefusedBeforeAdmissionAndNeverReachesTheBreaker() {
        Reference.TensorValue x = Reference.load(TestPaths.demoModels().resolve("demo-portable/1/reference.json"))
                .cases().get(0).inputs().get(0);
        assertThatThrownBy(() -> service().infer("demo-portable", null, request(x, new long[] {2, 8})))
                .isInstanceOf(InvalidInputException.class).hasMessageContaining("'x'");
        assertThat(heard).containsExactly("metrics:OTHER");
    }

    @Test
    void noCapacityIsRejectedAndTheModelIsNotBlamed() {
        admitFails = new OverloadedException("bulkhead full", Duration.ofMillis(100));
        Reference.TensorValue x = Reference.load(TestPaths.demoModels().resolve("demo-portable/1/reference.json"))
                .cases().get(0).inputs().get(0);
        assertThatThrownBy(() -> service().infer("demo-portable", null, request(x, x.shape())))
                .isSameAs(admitFails);
        assertThat(heard).containsExactly("admit", "metrics:REJECTED");
    }

    @Test
    void anOpenBreakerIsUnavailable() {
        admitFails = new ModelUnavailableException("breaker open", Duration.ofSeconds(10));
        Reference.TensorValue x = Reference.load(TestPaths.demoModels().resolve("demo-portable/1/reference.json"))
                .cases().get(0).inputs().get(0);
        assertThatThrownBy(() -> service().infer("demo-portable", null, request(x, x.shape())))
                .isSameAs(admitFails);
        assertThat(heard).containsExactly("admit", "metrics:OTHER");
    }

    @Test
    void anyOtherFailureIsTheBackendsAndReachesTheFaultListener() {
        admitFails = new IllegalStateException("stream could not be synchronized");
        Reference.TensorValue x = Reference.load(TestPaths.demoModels().resolve("demo-portable/1/reference.json"))
                .cases().get(0).inputs().get(0);
        assertThatThrownBy(() -> service().infer("demo-portable", null, request(x, x.shape())))
                .isInstanceOf(InferenceFailedException.class).hasMessage("internal error: IllegalStateException")
                .cause().isSameAs(admitFails);
        assertThat(heard).containsExactly("admit", "faults:IllegalStateException", "metrics:BACKEND");
    }

    @Test
    void eachKindCountsUnderOneTritonReason() {
        Map<InferenceException.Kind, InferenceObserver.FailureReason> want = Map.of(
                InferenceException.Kind.INVALID_INPUT, InferenceObserver.FailureReason.OTHER,
                InferenceException.Kind.NOT_FOUND, InferenceObserver.FailureReason.OTHER,
                InferenceException.Kind.UNAVAILABLE, InferenceObserver.FailureReason.OTHER,
                InferenceException.Kind.OVERLOADED, InferenceObserver.FailureReason.REJECTED,
                // Triton counts a request whose timeout expired in the queue as rejected.
                InferenceException.Kind.TIMED_OUT, InferenceObserver.FailureReason.REJECTED,
                InferenceException.Kind.DEADLINE_EXCEEDED, InferenceObserver.FailureReason.CANCELED,
                InferenceException.Kind.CLIENT_GONE, InferenceObserver.FailureReason.CANCELED,
                InferenceException.Kind.FAILED, InferenceObserver.FailureReason.BACKEND);
        assertThat(want).as("every kind").containsOnlyKeys(InferenceException.Kind.values());
        want.forEach((kind, reason) -> assertThat(InferenceObserver.FailureReason.of(kind)).as("%s", kind)
                .isEqualTo(reason));
    }

    @Test
    void aRequestWhoseCallerGoesWhileItWaitsForAnInstanceNeverRunsAndBlamesNobody() throws Exception {
        DynamicBatcherTest.TestCaller caller = new DynamicBatcherTest.TestCaller();
        InferenceService service = service();
        ExecutorService exec = Executors.newSingleThreadExecutor();
        try (AutoCloseable held = holdTheInstances()) {
            Reference.TensorValue x = input();
            Future<InferenceResponse> waiting = exec.submit(() -> service.infer("demo-portable",
                    null, request(x, x.shape()), OutputBuffers.ALLOCATE, caller));
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (caller.gone == null && System.nanoTime() < until) {
                Thread.sleep(1);
            }
            assertThat(caller.gone).as("watched once it waits").isNotNull();
            caller.leave();
            assertThatThrownBy(() -> waiting.get(5, TimeUnit.SECONDS)).cause()
                    .isInstanceOf(RequestCancelledException.class)
                    .hasMessageContaining("the client went away while it waited for an instance of model 'demo-portable'");
        } finally {
            exec.shutdownNow();
        }
        // Never admitted, never run: the breaker and the fault listener hear nothing.
        assertThat(heard).containsExactly("cancelled:queue/client", "metrics:CANCELED");
        assertThat(caller.gone).as("no longer watched once it ended").isNull();
    }

    @Test
    void aTimeoutThatPassesWhileTheRequestWaitsIsRejectedAsTritonRejectsIt() throws Exception {
        InferenceService service = service();
        try (AutoCloseable held = holdTheInstances()) {
            Reference.TensorValue x = input();
            // Cancelled at its own 50 ms: the queue's timeout (1 s) would end it as overloaded.
            assertThatThrownBy(() -> service.infer("demo-portable", null,
                    request(x, x.shape(), Map.of("timeout", 50_000L))))
                    .isInstanceOf(RequestCancelledException.class)
                    .hasMessageContaining("request timeout expired: it did not start within its timeout of 50000 us")
                    .satisfies(e -> assertThat(((RequestCancelledException) e).reason())
                            .isEqualTo(RequestCancelledException.Reason.TIMEOUT));
        }
        assertThat(heard).containsExactly("cancelled:queue/timeout", "metrics:REJECTED");
    }

    @Test
    void aSecondAttemptCountsItsTimeoutAndQueueTimeFromTheRequestsArrival() throws Exception {
        // A transport tries a call first on a thread that may not wait and, refused
        // (WouldWaitException), again on one that may: the second attempt passes the time the
        // request came. Here it came 3 s ago with a 2 s timeout, and no instance is free: it has
        // waited past its timeout already (counted from the attempt, it would wait in line until
        // the queue's limit and be refused as overloaded instead).
        InferenceService service = service();
        Reference.TensorValue x = input();
        long arrived = System.nanoTime() - TimeUnit.SECONDS.toNanos(3);
        try (AutoCloseable held = holdTheInstances()) {
            assertThatThrownBy(() -> service.infer("demo-portable", null, request(x, x.shape(), Map.of("timeout", 2_000_000L)),
                    OutputBuffers.ALLOCATE, Caller.STAYS, arrived))
                    .isInstanceOf(RequestCancelledException.class)
                    .satisfies(e -> assertThat(((RequestCancelledException) e).reason())
                            .isEqualTo(RequestCancelledException.Reason.TIMEOUT));
        }
        heard.clear();
        service.infer("demo-portable", null, request(x, x.shape()), OutputBuffers.ALLOCATE, Caller.STAYS, arrived);
        assertThat(heard).containsExactly("admit", "breaker:succeeded", "release", "metrics:success");
        assertThat(queueNanos).as("the time since it came counts as waiting").isGreaterThanOrEqualTo(TimeUnit.SECONDS.toNanos(3));
    }

    @Test
    void aRequestThatRunsAtOnceIsNeverWatchedAndATimeoutOnlyBoundsTheWait() {
        Caller caller = gone -> {
            throw new AssertionError("a request that does not wait is not watched");
        };
        Reference.TensorValue x = input();
        // A timeout that has passed by the time an instance is free does not stop it: it did not wait.
        service().infer("demo-portable", null, request(x, x.shape(), Map.of("timeout", 1L)),
                OutputBuffers.ALLOCATE, caller);
        assertThat(heard).containsExactly("admit", "breaker:succeeded", "release", "metrics:success");
    }

    @Test
    void aTimeoutThatIsNotAWholeNumberOfMicrosecondsIsBadInput() {
        Reference.TensorValue x = input();
        for (Object bad : List.of(-1L, 2.5, "soon")) {
            assertThatThrownBy(() -> service().infer("demo-portable", null, request(x, x.shape(), Map.of("timeout", bad))))
                    .isInstanceOf(InvalidInputException.class).hasMessageContaining("'timeout'");
        }
        assertThat(heard).containsExactly("metrics:OTHER", "metrics:OTHER", "metrics:OTHER");
    }
}
