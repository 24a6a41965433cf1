package io.etserve;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** What the command line asks of main before anything starts. */
class EtServeApplicationTest {

    @Test
    void onlyAVersionFlagAloneAsksForTheVersion() {
        assertThat(EtServeApplication.versionAsked(new String[] {"--version"})).isTrue();
        assertThat(EtServeApplication.versionAsked(new String[] {"-V"})).isTrue();
        assertThat(EtServeApplication.versionAsked(new String[] {})).isFalse();
        assertThat(EtServeApplication.versionAsked(new String[] {"--server.port=0"})).isFalse();
        // Beside settings it is one more argument, as Spring Boot reads it.
        assertThat(EtServeApplication.versionAsked(new String[] {"--version", "--server.port=0"})).isFalse();
        assertThat(io.etserve.config.ServiceVersion.current()).isEqualTo("dev");
    }
}
