package io.etserve.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.cuda.CudaException;
import io.etserve.cuda.CudaRuntime;
import io.etserve.cuda.CudaStreamFactory;
import io.etserve.cuda.StreamLease;
import io.etserve.cuda.StreamPool;
import io.etserve.cuda.StreamPools;
import io.etserve.health.CudaFaultMonitor;
import io.etserve.runtime.ExecuTorchException;
import io.etserve.runtime.Program;
import io.etserve.runtime.ProgramInstance;
import io.etserve.runtime.StreamSelection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.OptionalInt;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.boot.availability.AvailabilityChangeEvent;
import org.springframework.boot.availability.LivenessState;

/**
 * A real sticky CUDA fault (the probe delegate writes to an illegal address on the leased
 * stream): the bridge reports it as CudaError 700 from its completion wait, the pool stops
 * leasing, and liveness goes BROKEN. Tag gpu-fault: its own JVM, last, since the CUDA context
 * is unusable afterwards.
 */
@Tag("gpu-fault")
class GpuStickyFaultTest {

    @Test
    void anIllegalAddressBreaksLivenessAndStopsThePool() throws Exception {
        GpuFixtures.loadRuntime();
        CudaRuntime cuda = CudaRuntime.probe();
        CudaStreamFactory streams = new CudaStreamFactory(cuda, StreamSelection.CompletionWait.ADAPTIVE);
        StreamPool pool = new StreamPool(0, 1, 0, streams, n -> {});
        StreamPools pools = new StreamPools(Map.of(0, pool), null, Duration.ofSeconds(1));
        List<Object> events = new ArrayList<>();
        CudaFaultMonitor monitor = new CudaFaultMonitor(events::add, pools);
        try (Program program = Program.load(GpuFixtures.PROBE_MODEL, Program.Verification.INTERNAL_CONSISTENCY);
                ProgramInstance probe = program.newInstance("forward")) {
            StreamLease lease = pool.lease(Duration.ofSeconds(1));
            ExecuTorchException fault = null;
            try {
                GpuFixtures.probe(probe, lease.selection(), -1f);
            } catch (ExecuTorchException e) {
                fault = e;
            }
            assertThat(fault).as("the forward call must fail").isNotNull();
            System.out.println("forward failed as expected: " + fault.getMessage());
            assertThat(fault.isCudaError()).isTrue();
            assertThat(CudaException.isStickyCode(fault.errorCode())).as("code %d", fault.errorCode()).isTrue();

            monitor.onRuntimeFailure(OptionalInt.of(0), fault);
            assertThat(pool.fault()).isPresent();
            assertThat(events).anySatisfy(e -> assertThat(((AvailabilityChangeEvent<?>) e).getState())
                    .isEqualTo(LivenessState.BROKEN));
            // The stream cannot be synchronized any more: the context is gone. The faulted pool
            // takes it back without trying (on a device taken as hung, that would wait forever).
            assertThatThrownBy(() -> streams.synchronize(lease.stream())).isInstanceOfSatisfying(CudaException.class,
                    e -> assertThat(e.sticky()).isTrue());
            lease.close();
            assertThatThrownBy(() -> pool.lease(Duration.ofMillis(10))).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("faulted");
        }
    }
}
