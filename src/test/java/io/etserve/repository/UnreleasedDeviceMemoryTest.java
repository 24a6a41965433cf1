package io.etserve.repository;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.inference.ModelDescription;
import io.etserve.runtime.MethodSignature;
import java.util.List;
import org.junit.jupiter.api.Test;

class UnreleasedDeviceMemoryTest {

    private static ModelDescription using(String... backends) {
        return new ModelDescription("m", "1", new MethodSignature("forward", List.of(), List.of(), List.of(backends),
                List.of()), List.of(), List.of());
    }

    private final UnreleasedDeviceMemory refuse = new UnreleasedDeviceMemory(UnreleasedDeviceMemory.Policy.REFUSE);
    private final UnreleasedDeviceMemory leak = new UnreleasedDeviceMemory(UnreleasedDeviceMemory.Policy.LEAK);

    @Test
    void aCudaBackendModelOnAGpuIsRefusedWithTheReasonAndTheWayOut() {
        assertThat(refuse.refusal("resnet", using("CudaBackend"), "cuda:0", "reload")).hasValueSatisfying(why -> assertThat(why)
                .contains("cannot reload 'resnet'", "CudaBackend", "until the process exits",
                        "etserve.repository.unreleased-device-memory=leak"));
    }

    @Test
    void modelsThatGiveTheirMemoryBackAreNeverRefused() {
        assertThat(refuse.refusal("m", using("XnnpackBackend"), "cpu", "unload")).isEmpty();
        assertThat(refuse.refusal("m", using("CallerStreamProbe"), "cuda:0", "unload")).isEmpty();
        assertThat(refuse.refusal("m", using(), "cuda:0", "unload")).isEmpty();
    }

    @Test
    void leakAllowsItAndSaysWhatStaysAllocated() {
        assertThat(leak.refusal("resnet", using("CudaBackend"), "cuda:0", "unload")).isEmpty();
        assertThat(leak.leakNotice("resnet", "1", using("CudaBackend"), "cuda:0", 4)).hasValueSatisfying(
                line -> assertThat(line).contains("4 instance(s)", "CudaBackend", "cuda:0", "until the process exits"));
        assertThat(leak.leakNotice("m", "1", using("XnnpackBackend"), "cpu", 2)).isEmpty();
    }
}
