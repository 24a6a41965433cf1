package io.etserve.inference;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.math.BigInteger;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Triton's reserved request parameters, as each transport hands them over (gRPC's uint64 as a decimal string). */
class ReservedParametersTest {

    static Map<String, Object> of(String name, Object value) {
        Map<String, Object> m = new HashMap<>();
        m.put("x-custom", "anything");  // a client's own parameter is never looked at
        m.put(name, value);
        return m;
    }

    @Test
    void wellTypedValuesPass() {
        for (Object whole : new Object[] {0L, 7L, new BigInteger("18446744073709551615"), "18446744073709551615"}) {
            assertThatCode(() -> ReservedParameters.check(of("priority", whole))).doesNotThrowAnyException();
            assertThatCode(() -> ReservedParameters.check(of("sequence_id", whole))).doesNotThrowAnyException();
        }
        assertThatCode(() -> ReservedParameters.check(of("sequence_id", "session-1"))).doesNotThrowAnyException();
        // A C++ client's uint64 id past 2^63, sent as int64
        assertThatCode(() -> ReservedParameters.check(of("sequence_id", -9L))).doesNotThrowAnyException();
        assertThatCode(() -> ReservedParameters.check(of("sequence_id", ""))).doesNotThrowAnyException();
        for (String flag : new String[] {"sequence_start", "sequence_end"}) {
            assertThatCode(() -> ReservedParameters.check(of(flag, true))).doesNotThrowAnyException();
            assertThatCode(() -> ReservedParameters.check(of(flag, false))).doesNotThrowAnyException();
        }
        assertThatCode(() -> ReservedParameters.check(Map.of())).doesNotThrowAnyException();
    }

    @Test
    void wronglyTypedValuesAreRefusedByName() {
        for (Object bad : new Object[] {-1L, new BigInteger("-5"), 1.5, true, "high", ""}) {
            assertThatThrownBy(() -> ReservedParameters.check(of("priority", bad)))
                    .isInstanceOf(InvalidInputException.class)
                    .hasMessageStartingWith("the request parameter 'priority' must be a whole number (0 or more), got ");
        }
        for (Object bad : new Object[] {new BigInteger("-18446744073709551615"), 2.0, false}) {
            assertThatThrownBy(() -> ReservedParameters.check(of("sequence_id", bad)))
                    .isInstanceOf(InvalidInputException.class)
                    .hasMessageContaining("'sequence_id' must be a whole number or a string");
        }
        for (String flag : new String[] {"sequence_start", "sequence_end"}) {
            for (Object bad : new Object[] {1L, "true", 0.0}) {
                assertThatThrownBy(() -> ReservedParameters.check(of(flag, bad)))
                        .isInstanceOf(InvalidInputException.class)
                        .hasMessageContaining("'" + flag + "' must be a boolean");
            }
        }
    }

    /** Long.parseLong reads these as 3 and 33; as a number in a request they are a mistake or a probe. */
    @Test
    void digitsOfOtherScriptsAreNoWholeNumber() {
        for (String bad : new String[] {"\u0663", "\uFF13\uFF13", "1\u0663"}) {
            assertThat(ReservedParameters.isDecimalDigits(bad)).as(bad).isFalse();
            assertThatThrownBy(() -> ReservedParameters.check(of("priority", bad)))
                    .isInstanceOf(InvalidInputException.class);
        }
        assertThat(ReservedParameters.isDecimalDigits("0123456789")).isTrue();
    }

    @Test
    void aHostileValueIsQuotedEscaped() {
        assertThatThrownBy(() -> ReservedParameters.check(of("sequence_end", "yes\r\nForged: line")))
                .hasMessageEndingWith("got the string 'yes\\u000D\\u000AForged: line'");
    }

    @Test
    void theRefusalSaysWhatCameNotOnlyItsText() {
        assertThatThrownBy(() -> ReservedParameters.check(of("sequence_start", "true")))
                .hasMessage("the request parameter 'sequence_start' must be a boolean, got the string 'true'");
        assertThatThrownBy(() -> ReservedParameters.check(of("priority", true)))
                .hasMessage("the request parameter 'priority' must be a whole number (0 or more), got the boolean true");
        assertThatThrownBy(() -> ReservedParameters.check(of("priority", "")))
                .hasMessage("the request parameter 'priority' must be a whole number (0 or more), got the string ''");
    }
}
