package io.etserve.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class ExecuTorchExceptionTest {

    @Test
    void bytesOfAnUntrustedProgramReachTheMessageWithoutTheirControlCharacters() {
        // As the bridge quotes a corrupt program's identifier, and ExecuTorch's log lines about it.
        ExecuTorchException e = new ExecuTorchException("InvalidProgram", 0x23,
                "program identifier ';\u001b[8' is not 'ET12'", "line one\n\rline\u0005 two\u2028three");
        assertThat(e.getMessage()).isEqualTo(
                "program identifier ';?[8' is not 'ET12' (InvalidProgram): line one;?line? two?three");
        assertThat(e.getMessage()).doesNotContainPattern("\\p{Cntrl}");
        assertThat(e.nativeLog()).as("kept as logged, for code that reads it").contains("\u0005");
    }
}
