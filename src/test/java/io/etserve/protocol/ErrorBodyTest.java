package io.etserve.protocol;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class ErrorBodyTest {

    private static String error(String message) {
        return new String(ErrorBody.error(message), StandardCharsets.UTF_8);
    }

    @Test
    void plainMessage() {
        assertThat(error("model 'm' is not loaded")).isEqualTo("{\"error\":\"model 'm' is not loaded\"}");
    }

    @Test
    void quotesBackslashesAndControlCharactersAreEscaped() {
        assertThat(error("a\"b\\c\nd\te\u0001")).isEqualTo("{\"error\":\"a\\\"b\\\\c\\nd\\te\\u0001\"}");
    }

    @Test
    void nonAsciiStaysUtf8() {
        assertThat(ErrorBody.error("\u00e9")).containsExactly(
                '{', '"', 'e', 'r', 'r', 'o', 'r', '"', ':', '"', 0xC3, 0xA9, '"', '}');
    }

    @Test
    void loneSurrogateDoesNotBreakTheBody() {
        String body = error("x\uD800y");

        assertThat(body).startsWith("{\"error\":\"x").endsWith("y\"}");
    }

    @Test
    void nullMessage() {
        assertThat(error(null)).isEqualTo("{\"error\":\"unknown error\"}");
    }
}
