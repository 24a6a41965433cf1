package io.etserve.config;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.source.MapConfigurationPropertySource;

/** The early binding binds what the context will, and a value that does not bind is left to the context. */
class PropertiesEarlyBindTest {

    static Binder binder(Map<String, ?> values) {
        return new Binder(new MapConfigurationPropertySource(values));
    }

    @Test
    void bindsTheSettingsTheContextBindsAndReportsNothingOfItsOwn() {
        assertThat(PropertiesEarlyBind.bind(binder(Map.of("etserve.cuda.streams-per-device", "8")))).isTrue();
        // A value that cannot bind: no exception here (the context's binding fails the start with its message).
        assertThat(PropertiesEarlyBind.bind(binder(Map.of("etserve.cuda.placement", "everywhere")))).isFalse();
        assertThat(PropertiesEarlyBind.bind(binder(Map.of("etserve.http.inline-below", "-1")))).isFalse();
    }
}
