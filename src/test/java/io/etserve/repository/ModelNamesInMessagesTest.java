package io.etserve.repository;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.inference.UntrustedText;
import org.junit.jupiter.api.Test;

class ModelNamesInMessagesTest {

    @Test
    void readableTextIsKeptAndInvisibleOrControlCharactersAreEscaped() {
        assertThat(UntrustedText.abbreviate("résumé-☃-模型")).isEqualTo("résumé-☃-模型");
        assertThat(UntrustedText.abbreviate("a\nINFO forged")).isEqualTo("a\\u000AINFO forged");
        assertThat(UntrustedText.abbreviate("abc\u202Edef")).isEqualTo("abc\\u202Edef");
        assertThat(UntrustedText.abbreviate("x\uD800y")).isEqualTo("x\\uD800y");
        assertThat(UntrustedText.abbreviate("😀".repeat(70))).isEqualTo("😀".repeat(64) + "...");
        assertThat(UntrustedText.abbreviate(null)).isEmpty();
    }
}
