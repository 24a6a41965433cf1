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

    @Test
    void theBytesExecuTorchQuotesFromAFileThatIsNotAProgramAreLeftOut() {
        // As ExecuTorch logs a model.pte (or .ptd) that is some other file: its bytes 4-7, up to four.
        ExecuTorchException e = new ExecuTorchException("InvalidProgram", 0x23, "cannot load x.pte",
                "E program.cpp:170] Program identifier 'ot:x' != expected 'ET12'\n"
                        + "E flat_tensor_data_map.cpp:277] FlatTensor identifier 'SE' != expected 'FT01'");
        assertThat(e.getMessage()).isEqualTo("cannot load x.pte (InvalidProgram): E program.cpp:170] Program"
                + " identifier (bytes 4-7 of the file, not shown) != expected 'ET12';E flat_tensor_data_map.cpp:277]"
                + " FlatTensor identifier (bytes 4-7 of the file, not shown) != expected 'FT01'");
        // Text that only looks like it stays as it is.
        assertThat(ExecuTorchException.withoutFileBytes("input identifier 'too long' != expected 'x'"))
                .isEqualTo("input identifier 'too long' != expected 'x'");
        assertThat(ExecuTorchException.withoutFileBytes("identifier 'ab")).isEqualTo("identifier 'ab");
        // ... also before one that is replaced
        assertThat(ExecuTorchException.withoutFileBytes("A identifier 'too long' != expected 'x'; B identifier 'ab'"
                + " != expected 'ET12' C")).isEqualTo("A identifier 'too long' != expected 'x'; B identifier (bytes 4-7"
                + " of the file, not shown) != expected 'ET12' C");
    }
}
