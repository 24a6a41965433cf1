package io.etserve.gpu;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.cuda.CudaRuntime;
import io.etserve.cuda.TensorRtProbe;
import io.etserve.repository.NodeCapabilities;
import io.etserve.runtime.NativeRuntime;
import io.etserve.runtime.Program;
import io.etserve.support.TestPaths;
import java.util.HashSet;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * On a GPU node: a model declaring TensorRTBackend is refused when TensorRT does not load, and
 * one declaring CudaBackend when that delegate is not registered (the PyPI wheel has none), each
 * with its reason, before any traffic; with the delegate built in, the CudaBackend model is runnable.
 */
@Tag("gpu")
class GpuNodeCapabilitiesTest {

    @Test
    void gpuDelegatesAreCheckedAgainstWhatThisNodeHas() {
        GpuFixtures.loadRuntime();
        CudaRuntime cuda = CudaRuntime.probe();
        TensorRtProbe trt = TensorRtProbe.probe();
        NodeCapabilities node = new NodeCapabilities(new HashSet<>(NativeRuntime.info().registeredBackends()), cuda, trt);
        System.out.println("TensorRT: " + (trt.available() ? trt.version() : trt.reason()));
        try (Program p = Program.load(TestPaths.testModels().resolve("needs-tensorrt/1/model.pte"),
                Program.Verification.INTERNAL_CONSISTENCY)) {
            var why = node.whyNotRunnable(p.signature("forward"));
            assertThat(why).isPresent();
            System.out.println("needs-tensorrt: " + why.get());
            assertThat(why.get()).doesNotContain("needs a CUDA device");
        }
        try (Program p = Program.load(TestPaths.testModels().resolve("needs-cuda-backend/1/model.pte"),
                Program.Verification.INTERNAL_CONSISTENCY)) {
            var why = node.whyNotRunnable(p.signature("forward"));
            System.out.println("needs-cuda-backend: " + why.orElse("runnable"));
            if (NativeRuntime.info().registeredBackends().contains("CudaBackend")) {
                // A build with the CUDA delegate (the CUDA wheel's, or scripts/cuda-backend.sh's).
                assertThat(why).isEmpty();
            } else {
                assertThat(why).hasValueSatisfying(w -> assertThat(w).contains("not registered"));
            }
        }
    }
}
