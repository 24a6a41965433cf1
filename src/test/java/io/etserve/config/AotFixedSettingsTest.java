package io.etserve.config;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.cuda.CudaEarlyStart;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.boot.context.logging.LoggingApplicationListener;
import org.springframework.boot.support.EnvironmentPostProcessorApplicationListener;
import org.springframework.mock.env.MockEnvironment;

/**
 * Which starts may use the context generated at build time. The build's values here are written
 * out by hand as the build records them for the defaults (application.yml: gRPC on, tracing off,
 * a management port of its own, CUDA auto, repository read at startup).
 */
class AotFixedSettingsTest {

    private static MockEnvironment defaults() {
        return new MockEnvironment().withProperty("server.port", "8080").withProperty("management.server.port", "8081")
                .withProperty("etserve.grpc.enabled", "true").withProperty("etserve.tracing.enabled", "false")
                .withProperty("etserve.cuda.enabled", "auto").withProperty("etserve.repository.mode", "startup")
                .withProperty("management.endpoints.web.exposure.include", "health,info,prometheus");
    }

    private static Map<String, String> built() {
        return AotFixedSettings.read(defaults());
    }

    @Test
    void recordsWhatTheConditionsLookAt() {
        Map<String, String> built = built();
        assertThat(built).containsEntry("management.server.port", "DIFFERENT")
                .containsEntry("etserve.grpc.enabled", "true")
                .containsEntry("etserve.cuda.enabled", "auto or true")
                .containsEntry("etserve.repository.mode", "not poll")
                .containsEntry("management.endpoints.web.exposure.include", "health,info,prometheus")
                .containsEntry("active profiles", "");
    }

    @Test
    void theBuildsOwnSettingsAndChangesThatKeepTheBeansUseIt() {
        assertThat(AotFixedSettings.reasonToBuildAtStartup(defaults(), built())).isEmpty();
        MockEnvironment moved = defaults().withProperty("server.port", "9000")
                .withProperty("management.server.port", "9001").withProperty("etserve.cuda.enabled", "TRUE")
                .withProperty("etserve.repository.mode", "explicit").withProperty("etserve.grpc.port", "0");
        assertThat(AotFixedSettings.reasonToBuildAtStartup(moved, built())).isEmpty();
    }

    @Test
    void aChangeThatWouldChangeTheBeansBuildsTheContextAtStartup() {
        assertRebuilds("etserve.grpc.enabled", "false",
                "etserve.grpc.enabled: built with 'true', now 'false'");
        assertRebuilds("management.server.port", "-1",
                "management.server.port: built with 'DIFFERENT', now 'DISABLED'");
        assertRebuilds("management.server.port", "8080", "now 'SAME'");
        assertRebuilds("etserve.cuda.enabled", "false", "etserve.cuda.enabled");
        assertRebuilds("etserve.repository.mode", "poll", "etserve.repository.mode");
        assertRebuilds("spring.profiles.active", "dev", "active profiles: built with '', now 'dev'");
        assertRebuilds("server.forward-headers-strategy", "framework", "server.forward-headers-strategy");
        assertRebuilds("management.endpoints.web.exposure.include", "*", "management.endpoints.web.exposure.include");
    }

    /** The build's defaults with {@code key} set to {@code value}: built at startup, saying {@code said}. */
    private static void assertRebuilds(String key, String value, String said) {
        assertThat(AotFixedSettings.reasonToBuildAtStartup(defaults().withProperty(key, value), built()))
                .hasValueSatisfying(why -> assertThat(why).contains(said));
    }

    @Test
    void anyManagementSettingButTheServersCounts() {
        // Actuator's conditions read them (which health indicators, endpoints and exports exist).
        assertThat(AotFixedSettings.reasonToBuildAtStartup(
                defaults().withProperty("management.health.diskspace.enabled", "false"), built()))
                .hasValueSatisfying(why -> assertThat(why)
                        .contains("management.health.diskspace.enabled: built with '', now 'false'"));
        // Read at startup in either mode, and set through documented environment variables.
        assertThat(AotFixedSettings.reasonToBuildAtStartup(defaults()
                .withProperty("management.server.address", "127.0.0.1")
                .withProperty("management.tracing.sampling.probability", "1.0")
                .withProperty("management.opentelemetry.tracing.export.otlp.endpoint", "http://collector:4318/v1/traces"),
                built())).isEmpty();
    }

    @Test
    void canBeTurnedOffAndNeedsTheBuildsRecord() {
        assertThat(AotFixedSettings.reasonToBuildAtStartup(
                defaults().withProperty("etserve.startup.generated-context", "false"), built()))
                .hasValue("etserve.startup.generated-context=false");
        assertThat(AotFixedSettings.reasonToBuildAtStartup(defaults(), Map.of())).isPresent();
    }

    @Test
    void aPackagedStartUsesTheGeneratedContextUnlessToldOtherwise() {
        assertThat(AotFixedSettings.mode(null, true)).isEqualTo(AotFixedSettings.Mode.BY_DEFAULT);
        assertThat(AotFixedSettings.mode("false", true)).isEqualTo(AotFixedSettings.Mode.OFF);
        assertThat(AotFixedSettings.mode("true", true)).isEqualTo(AotFixedSettings.Mode.ASKED);
        // classes from a directory may be newer than what was generated from them
        assertThat(AotFixedSettings.mode(null, false)).isEqualTo(AotFixedSettings.Mode.OFF);
        assertThat(AotFixedSettings.mode("true", false)).isEqualTo(AotFixedSettings.Mode.ASKED);
    }

    @Test
    void classesFromADirectoryAreNotAPackagedStart() {
        // The tests' classes come from target/classes, whatever a previous package left there.
        assertThat(AotFixedSettings.generatedContextInJar(io.etserve.EtServeApplication.class)).isFalse();
        assertThat(AotFixedSettings.generatedContextInJar(null)).isFalse();
    }

    @Test
    void theEarlyListenersRunOnceTheConfigurationFilesAreReadAndBeforeLogging() {
        // Before Boot's listener they would miss application.yml; CUDA's start goes first, as the
        // context may wait for it, then the AOT decision, then logging.
        int configFiles = EnvironmentPostProcessorApplicationListener.DEFAULT_ORDER;
        int cuda = new CudaEarlyStart().getOrder();
        assertThat(cuda).isGreaterThan(configFiles);
        assertThat(new PropertiesEarlyBind().getOrder()).isGreaterThan(configFiles);
        assertThat(new AotFixedSettings().getOrder()).isGreaterThan(cuda)
                .isLessThan(LoggingApplicationListener.DEFAULT_ORDER);
    }
}
