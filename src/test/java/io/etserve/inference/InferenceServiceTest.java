package io.etserve.inference;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.runtime.ExecuTorchException;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
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
            }

            public void failure(String model, String version, FailureReason reason, long requestNanos) {
                heard.add("metrics:" + reason);
            }
        };
        ModelAdmission admission = new ModelAdmission() {
            public Admission admit(LoadedModel model) {
                heard.add("admit");
                if (admitFails != null) {
                    throw admitFails;
                }
                return new Admission() {
                    public void succeeded(long nanos) {
                        heard.add("breaker:succeeded");
                    }

                    public void failed(long nanos, Throwable error) {
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
        FaultListener faults = (device, error) -> heard.add("faults:" + error.getClass().getSimpleName());
        return new InferenceService(registry, Duration.ofSeconds(1), observer, admission, faults,
                new io.etserve.runtime.DirectBufferPool(1 << 20));
    }

    static InferenceRequest request(Reference.TensorValue x, long[] shape) {
        return new InferenceRequest(null, Map.of(), List.of(new Tensor("x", DataType.FP32, shape, x.bytes())),
                List.of(), false);
    }

    @Test
    void aGoodCallIsOneSuccessEverywhere() {
        Reference ref = Reference.load(TestPaths.demoModels().resolve("demo-portable/1/reference.json"));
        Reference.TensorValue x = ref.cases().get(0).inputs().get(0);
        InferenceResponse r = service().infer("demo-portable", null, request(x, x.shape()));
        java.nio.ByteBuffer y = r.outputs().get(0).data();
        List<Double> want = ref.cases().get(0).outputs().get(0).data();
        for (int i = 0; i < want.size(); i++) {
            assertThat(ref.close(y.getFloat(4 * i), want.get(i))).as("y[%d]", i).isTrue();
        }
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
                .isSameAs(admitFails);
        assertThat(heard).containsExactly("admit", "faults:IllegalStateException", "metrics:BACKEND");
    }

    @Test
    void eachFailureHasOneOutcome() {
        assertThat(InferenceService.Outcome.of(new InvalidInputException("x"))).isEqualTo(InferenceService.Outcome.BAD_INPUT);
        assertThat(InferenceService.Outcome.of(new OverloadedException("x", Duration.ZERO)))
                .isEqualTo(InferenceService.Outcome.REJECTED);
        assertThat(InferenceService.Outcome.of(new InterruptedException())).isEqualTo(InferenceService.Outcome.REJECTED);
        assertThat(InferenceService.Outcome.of(new ModelUnavailableException("x")))
                .isEqualTo(InferenceService.Outcome.UNAVAILABLE);
        assertThat(InferenceService.Outcome.of(new RuntimeException("x"))).isEqualTo(InferenceService.Outcome.BACKEND_FAILURE);
        // ExecuTorch's own verdict: a bad argument is the caller's, anything else the runtime's.
        assertThat(InferenceService.Outcome.of(new ExecuTorchException("InvalidArgument", 0x12, "x", "")))
                .isEqualTo(InferenceService.Outcome.BAD_INPUT);
        assertThat(InferenceService.Outcome.of(new ExecuTorchException("MemoryAllocationFailed", 0x21, "x", "")))
                .isEqualTo(InferenceService.Outcome.BACKEND_FAILURE);
    }
}
