package io.etserve.inference;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class ModelNamesInMessagesTest {

    @Test
    void readableTextIsKeptAndInvisibleOrControlCharactersAreEscaped() {
        assertThat(ModelRegistry.abbreviate("résumé-☃-模型")).isEqualTo("résumé-☃-模型");
        assertThat(ModelRegistry.abbreviate("a\nINFO forged")).isEqualTo("a\\u000AINFO forged");
        assertThat(ModelRegistry.abbreviate("abc\u202Edef")).isEqualTo("abc\\u202Edef");
        assertThat(ModelRegistry.abbreviate("x\uD800y")).isEqualTo("x\\uD800y");
        assertThat(ModelRegistry.abbreviate("😀".repeat(70))).isEqualTo("😀".repeat(64) + "...");
        assertThat(ModelRegistry.abbreviate(null)).isEmpty();
    }
}
