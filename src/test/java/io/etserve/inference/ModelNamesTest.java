package io.etserve.inference;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** The rules of names, written out: a safe path segment, URL segment and metric label. */
class ModelNamesTest {

    @Test
    void modelNames() {
        for (String good : new String[] {"m", "demo-xnnpack", "a.b_c-1", "9", "x".repeat(128)}) {
            assertThat(ModelNames.isValidModelName(good)).as(good).isTrue();
        }
        for (String bad : new String[] {null, "", ".m", "-m", "_m", "a..b", "a/b", "a b", "é", "m\n",
                "x".repeat(129), "..", "a%2Fb"}) {
            assertThat(ModelNames.isValidModelName(bad)).as(String.valueOf(bad)).isFalse();
        }
    }

    @Test
    void versions() {
        for (String good : new String[] {"1", "12", "9".repeat(18)}) {
            assertThat(ModelNames.isValidVersion(good)).as(good).isTrue();
        }
        for (String bad : new String[] {null, "", "0", "01", "1a", "-1", "1".repeat(19), " 1"}) {
            assertThat(ModelNames.isValidVersion(bad)).as(String.valueOf(bad)).isFalse();
        }
    }
}
