package io.etserve.execution;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.cuda.CudaException;
import io.etserve.inference.ModelUnavailableException;
import io.etserve.inference.ModelDescription;
import io.etserve.modelconfig.ModelConfig;
import io.etserve.runtime.DirectBufferPool;
import io.etserve.runtime.ExecutionInput;
import io.etserve.runtime.Program;
import io.etserve.runtime.ProgramInstance;
import io.etserve.runtime.StreamSelection;
import io.etserve.support.TestPaths;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A call's end when it fails or giving its stream back fails (a faulted device's synchronize
 * throws): the admission still ends, once, so the breaker never waits for an outcome that cannot
 * come, and a failure is heard before the stream goes back.
 */
class ForwardTest {

    private final List<String> heard = new ArrayList<>();
    private final CudaException sticky = new CudaException("cudaStreamSynchronize", 700, "cudaErrorIllegalAddress",
            "an illegal memory access was encountered");

    private Forward forward(RuntimeException refusal) {
        return new Forward(InferenceObserver.NONE, InferenceServiceTest.recording(heard, () -> refusal),
                (device, error) -> {}, InferenceSpans.OFF, new DirectBufferPool(1 << 20));
    }

    private ExecutionSlot slotWhoseReleaseThrows() {
        return new ExecutionSlot(null, StreamSelection.none(), () -> {
            heard.add("slot");
            throw sticky;
        });
    }

    @Test
    void aCallThatNeverRanEndsItsAdmissionThoughItsStreamCannotBeGivenBack() throws Exception {
        Forward.Call call = forward(null).admit(null, slotWhoseReleaseThrows());
        assertThatThrownBy(call::close).isSameAs(sticky);
        assertThat(heard).containsExactly("admit", "slot", "breaker:ignored", "release");
    }

    @Test
    void aRefusedAdmissionIsWhatTheCallerHearsThoughTheSlotCannotBeGivenBack() {
        ModelUnavailableException open = new ModelUnavailableException("circuit breaker is open");
        assertThatThrownBy(() -> forward(open).admit(null, slotWhoseReleaseThrows())).isSameAs(open)
                .hasSuppressedException(sticky);
        assertThat(heard).containsExactly("admit", "slot");
    }

    @Test
    void aFailedCallIsReportedBeforeItsStreamGoesBack() throws Exception {
        // The fault listener stops a faulted device's streams; only then may the slot go back,
        // since giving back a stream of a device taken as hung must not wait for its work.
        CudaException hung = new CudaException("waiting for the stream", 702, "cudaErrorLaunchTimeout",
                "the GPU work did not complete within 500 ms");
        try (Program program = Program.load(TestPaths.demoModels().resolve("demo-portable/1/model.pte"),
                Program.Verification.INTERNAL_CONSISTENCY);
                ProgramInstance instance = program.newInstance("forward")) {
            LoadedModel model = new LoadedModel(new ModelDescription("m", "1", instance.signature(), List.of(), List.of()),
                    program, new CpuInstancePool(List.of(instance)), 1 << 20, null, ModelConfig.defaults());
            Forward forward = new Forward(InferenceObserver.NONE, InferenceServiceTest.recording(heard, () -> null),
                    (device, error) -> heard.add("fault:" + ((CudaException) error).errorName()), InferenceSpans.OFF,
                    new DirectBufferPool(1 << 20));
            ByteBuffer x = ByteBuffer.allocateDirect(16 * 4).order(ByteOrder.LITTLE_ENDIAN);
            try (Forward.Call call = forward.admit(model, new ExecutionSlot(instance, StreamSelection.none(),
                    () -> heard.add("slot")))) {
                assertThatThrownBy(() -> call.run(List.of(new ExecutionInput(x, 6, new long[] {1, 16})),
                        (output, bytes) -> {
                            throw hung;
                        }, 0, List.of())).isSameAs(hung);
            }
        }
        assertThat(heard).containsExactly("admit", "breaker:failed", "fault:cudaErrorLaunchTimeout", "slot", "release");
    }
}
