package io.etserve.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;
import org.springframework.mock.env.MockEnvironment;

class CudaEarlyStartTest {

    @Test
    void startsUnlessCudaOrTheEarlyStartIsTurnedOff() {
        assertThat(CudaEarlyStart.wanted(new MockEnvironment())).isTrue();
        assertThat(CudaEarlyStart.wanted(new MockEnvironment().withProperty("etserve.cuda.enabled", "true"))).isTrue();
        assertThat(CudaEarlyStart.wanted(new MockEnvironment().withProperty("etserve.cuda.enabled", "FALSE"))).isFalse();
        assertThat(CudaEarlyStart.wanted(new MockEnvironment().withProperty("etserve.cuda.early-start", "false")))
                .isFalse();
    }
}
