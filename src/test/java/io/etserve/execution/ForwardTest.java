package io.etserve.execution;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.cuda.CudaException;
import io.etserve.inference.ModelUnavailableException;
import io.etserve.runtime.DirectBufferPool;
import io.etserve.runtime.StreamSelection;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A call's end when giving its stream back fails (a faulted device's synchronize throws): the
 * admission still ends, once, so the breaker never waits for an outcome that cannot come.
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
}
