package io.etserve.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.cuda.QueuePolicy;
import io.etserve.repository.DevicePlacement;
import io.etserve.runtime.Program;
import io.etserve.security.RestrictedApis;
import java.time.Duration;
import java.util.Map;
import org.eclipse.jetty.server.HttpConnectionFactory;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.junit.jupiter.api.Test;
import org.springframework.boot.context.properties.bind.BindException;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.source.MapConfigurationPropertySource;

/** etserve.* bound as users write it: enum values in any case, refusals that name the property. */
class EtServePropertiesTest {

    static EtServeProperties bind(Map<String, ?> values) {
        return new Binder(new MapConfigurationPropertySource(values)).bindOrCreate("etserve", EtServeProperties.class);
    }

    @Test
    void enumValuesBindAsWrittenInApplicationYml() {
        EtServeProperties p = bind(Map.of("etserve.native.verification", "internal-consistency",
                "etserve.cuda.placement", "all", "etserve.cuda.enabled", "false"));
        assertThat(p.nativeRuntime().verification()).isEqualTo(Program.Verification.INTERNAL_CONSISTENCY);
        assertThat(p.cuda().placement()).isEqualTo(DevicePlacement.Policy.ALL);
        assertThat(p.cuda().enabled()).isEqualTo(EtServeProperties.CudaMode.FALSE);
        // YAML reads `enabled: true` as a boolean.
        assertThat(bind(Map.of("etserve.cuda.enabled", Boolean.TRUE)).cuda().enabled())
                .isEqualTo(EtServeProperties.CudaMode.TRUE);
        EtServeProperties defaults = bind(Map.of());
        assertThat(defaults.cuda().enabled()).isEqualTo(EtServeProperties.CudaMode.AUTO);
        assertThat(defaults.cuda().placement()).isEqualTo(DevicePlacement.Policy.SPREAD);
        assertThat(defaults.nativeRuntime().verification()).isEqualTo(Program.Verification.INTERNAL_CONSISTENCY);
    }

    @Test
    void restrictedApisBindByTritonsGroupNamesAndRefuseWhatCannotWork() {
        var restricted = bind(Map.of("etserve.api.restricted.model-repository.header", "admin-key",
                "etserve.api.restricted.model-repository.value", "k")).api().restrictedApis();
        assertThat(restricted.restricts(RestrictedApis.Group.MODEL_REPOSITORY)).isTrue();
        assertThat(restricted.restricts(RestrictedApis.Group.INFERENCE)).isFalse();
        // An empty header leaves the group open (the chart's default when no Secret is given).
        assertThat(bind(Map.of("etserve.api.restricted.model-repository.header", "")).api().restrictedApis()
                .restricts(RestrictedApis.Group.MODEL_REPOSITORY)).isFalse();
        assertThatThrownBy(() -> bind(Map.of("etserve.api.restricted.repository.header", "k")).api().restrictedApis())
                .hasMessageContaining("etserve.api.restricted.repository: no such API group (health, metadata, inference,"
                        + " model-repository, model-config, statistics, shared-memory)");
        assertThatThrownBy(() -> bind(Map.of("etserve.api.restricted.model-repository.header", "admin-key"))
                .api().restrictedApis()).hasMessageContaining("needs a value");
    }

    @Test
    void aMisspeltValueOrANonPositiveCountFailsNamingTheProperty() {
        assertThatThrownBy(() -> bind(Map.of("etserve.cuda.placement", "everywhere")))
                .isInstanceOf(BindException.class).hasMessageContaining("etserve.cuda.placement");
        assertThatThrownBy(() -> bind(Map.of("etserve.native.verification", "none")))
                .isInstanceOf(BindException.class).hasMessageContaining("etserve.native.verification");
        assertThatThrownBy(() -> bind(Map.of("etserve.cuda.streams-per-device", "0")))
                .hasRootCauseMessage("etserve.cuda.streams-per-device must be at least 1, not 0");
        assertThatThrownBy(() -> bind(Map.of("etserve.inference.max-inputs", "-1")))
                .hasRootCauseMessage("etserve.inference.max-inputs must be at least 1, not -1");
    }

    @Test
    void theCpuThreadpoolIsTheCpusThisProcessMayUseUnlessSetAndNeverNegative() {
        assertThat(bind(Map.of()).nativeRuntime().cpuThreads()).isZero();
        assertThat(bind(Map.of()).nativeRuntime().cpuThreadsOrAvailable())
                .isEqualTo(Runtime.getRuntime().availableProcessors());
        assertThat(bind(Map.of("etserve.native.cpu-threads", "3")).nativeRuntime().cpuThreadsOrAvailable()).isEqualTo(3);
        assertThatThrownBy(() -> bind(Map.of("etserve.native.cpu-threads", "-1")))
                .hasRootCauseMessage("etserve.native.cpu-threads must be 0 (the CPUs this process may use) or a number"
                        + " of threads, got -1");
    }

    @Test
    void theInlineSettingsAreOffOrBoundsAndNeverNegative() {
        EtServeProperties defaults = bind(Map.of());
        assertThat(defaults.http().inlineAloneBelow()).isEqualTo(Duration.ofMillis(20));
        assertThat(defaults.http().inlineBelow()).isEqualTo(Duration.ofNanos(250_000));
        assertThat(defaults.grpc().inlineAloneBelow()).isZero();
        assertThat(defaults.grpc().inlineBelow()).isEqualTo(Duration.ofNanos(250_000));
        assertThat(bind(Map.of("etserve.grpc.inline-alone-below", "20ms")).grpc().inlineAloneBelow())
                .isEqualTo(Duration.ofMillis(20));
        for (String property : new String[] {"etserve.http.inline-below", "etserve.http.inline-alone-below",
                "etserve.grpc.inline-alone-below", "etserve.grpc.inline-below"}) {
            assertThatThrownBy(() -> bind(Map.of(property, "-1ms"))).isInstanceOf(BindException.class)
                    .hasRootCauseMessage(property + " must not be negative");
        }
    }

    @Test
    void selectorsRunningCallsAreOnePerCore() {
        assertThat(EtServeProperties.Http.selectorsFor(1)).isEqualTo(1);
        assertThat(EtServeProperties.Http.selectorsFor(2)).isEqualTo(2);
        assertThat(EtServeProperties.Http.selectorsFor(16)).isEqualTo(16);
        assertThat(EtServeProperties.Http.selectorsFor(0)).isEqualTo(1);
    }

    @Test
    void grpcEventLoopsAreOnePerCoreWhileCallsRunOnThemUnlessSet() {
        EtServeProperties.Grpc defaults = bind(Map.of()).grpc();
        assertThat(defaults.eventLoopsFor(1)).isEqualTo(1);
        assertThat(defaults.eventLoopsFor(2)).isEqualTo(2);
        assertThat(defaults.eventLoopsFor(16)).isEqualTo(16);
        // Lone connections' calls on their loops too (the Helm chart's GPU nodes), or only theirs:
        // one per core all the same; no calls on the loops at all: Netty's own two per core.
        assertThat(bind(Map.of("etserve.grpc.inline-alone-below", "20ms")).grpc().eventLoopsFor(16)).isEqualTo(16);
        assertThat(bind(Map.of("etserve.grpc.inline-below", "0s", "etserve.grpc.inline-alone-below", "20ms")).grpc()
                .eventLoopsFor(16)).isEqualTo(16);
        assertThat(bind(Map.of("etserve.grpc.inline-below", "0s")).grpc().eventLoopsFor(2)).isEqualTo(4);
        assertThat(bind(Map.of("etserve.grpc.event-loops", "3")).grpc().eventLoopsFor(16)).isEqualTo(3);
        assertThatThrownBy(() -> bind(Map.of("etserve.grpc.event-loops", "0")))
                .hasRootCauseMessage("etserve.grpc.event-loops must be at least 1, not 0");
    }

    @Test
    void theSleepSliceIsADurationOfAtMostTheBridgesSixteenBitsOfMicroseconds() {
        assertThat(bind(Map.of()).cuda().sleepSlice()).isZero();
        assertThat(bind(Map.of("etserve.cuda.sleep-slice", "50us")).cuda().sleepSlice())
                .isEqualTo(Duration.ofNanos(50_000));
        assertThat(bind(Map.of("etserve.cuda.sleep-slice", "50")).cuda().sleepSlice())
                .as("a bare number is microseconds").isEqualTo(Duration.ofNanos(50_000));
        assertThatThrownBy(() -> bind(Map.of("etserve.cuda.sleep-slice", "100ms")))
                .hasRootCauseMessage("etserve.cuda.sleep-slice: a sleep slice must be 0 to 65535us, got PT0.1S");
    }

    @Test
    void theCompletionTimeoutDefaultsToAMinuteAndZeroMeansNone() {
        assertThat(bind(Map.of()).cuda().completionTimeout()).isEqualTo(Duration.ofSeconds(60));
        assertThat(bind(Map.of("etserve.cuda.completion-timeout", "0")).cuda().completionTimeout()).isZero();
        assertThatThrownBy(() -> bind(Map.of("etserve.cuda.completion-timeout", "-1s")))
                .hasRootCauseMessage("etserve.cuda.completion-timeout: a completion timeout must be 0 to 2147483647ms, got PT-1S");
    }

    @Test
    void theQueuePolicyBindsAsWrittenAndDefaultsToAdaptiveLifo() {
        assertThat(bind(Map.of()).inference().queuePolicy().policy()).isEqualTo(QueuePolicy.DEFAULT);
        QueuePolicy fifo = bind(Map.of("etserve.inference.queue-policy.order", "fifo",
                "etserve.inference.queue-policy.give-up-window", "250ms",
                "etserve.inference.queue-policy.max-fifo-wait", "80ms")).inference().queuePolicy().policy();
        assertThat(fifo).isEqualTo(new QueuePolicy(QueuePolicy.Order.FIFO,
                Duration.ofMillis(250), Duration.ofMillis(80)));
        assertThatThrownBy(() -> bind(Map.of("etserve.inference.queue-policy.order", "lifo")))
                .isInstanceOf(BindException.class).hasMessageContaining("etserve.inference.queue-policy.order");
        assertThatThrownBy(() -> bind(Map.of("etserve.inference.queue-policy.give-up-window", "-1s")))
                .hasRootCauseMessage("etserve.inference.queue-policy.give-up-window and max-fifo-wait must not be negative");
    }

    @Test
    void theInputBufferSizeReachesEveryHttpConnectorAndIsBounded() {
        EtServeProperties.Http http = bind(Map.of("etserve.http.input-buffer-size", "128KB")).http();
        Server server = new Server();
        ServerConnector connector = new ServerConnector(server);
        server.addConnector(connector);
        new JettyServerSettings(http).customize(server);
        assertThat(connector.getConnectionFactory(HttpConnectionFactory.class)
                .getHttpConfiguration().getInputBufferSize()).isEqualTo(128 * 1024);
        assertThat(bind(Map.of()).http().inputBufferSize().toKilobytes()).isEqualTo(64);
        assertThatThrownBy(() -> bind(Map.of("etserve.http.input-buffer-size", "1KB")))
                .hasRootCauseMessage("etserve.http.input-buffer-size must be 8KB to 16MB");
    }
}
