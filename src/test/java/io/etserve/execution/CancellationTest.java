package io.etserve.execution;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.inference.Caller;
import io.etserve.inference.InvalidInputException;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The {@code timeout} parameter as Triton's clients send it: microseconds, a number or gRPC's decimal string. */
class CancellationTest {

    @Test
    void aTimeoutInDecimalDigitsBoundsTheRequest() {
        long start = System.nanoTime();
        Cancellation c = Cancellation.of(Caller.STAYS, Map.of("timeout", "300"), start);
        assertThat(c.expired(start + 299_000)).isFalse();
        assertThat(c.expired(start + 301_000)).isTrue();
    }

    @Test
    void digitsOfOtherScriptsAreRefused() {
        // U+0663 is ARABIC-INDIC DIGIT THREE; Long.parseLong would read "\u0663\u0660\u0660" as 300.
        assertThatThrownBy(() -> Cancellation.of(Caller.STAYS, Map.of("timeout", "\u0663\u0660\u0660"), System.nanoTime()))
                .isInstanceOf(InvalidInputException.class)
                .hasMessageStartingWith("the request parameter 'timeout' must be a whole number of microseconds");
    }
}
