package io.etserve.config;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.cuda.CudaRuntime;
import io.etserve.cuda.StreamFactory;
import io.etserve.cuda.StreamPool;
import io.etserve.cuda.StreamPools;
import io.etserve.cuda.TensorRtProbe;
import io.etserve.support.OpaqueStreamFactory;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.core.env.MapPropertySource;

/** The CUDA concern alone, as Spring Boot tests its auto-configurations: which beans each setting gives. */
class CudaConfigurationTest {

    private static final String DISABLED = "CUDA disabled by configuration (etserve.cuda.enabled=false)";

    @EnableConfigurationProperties(EtServeProperties.class)
    static class Properties {}

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withUserConfiguration(Properties.class, CudaConfiguration.class)
            .withBean(MeterRegistry.class, SimpleMeterRegistry::new);

    @ParameterizedTest
    @ValueSource(strings = {"false", "FALSE", "False"})
    void cudaSwitchedOffIsNeverStartedAndEveryBeanSaysWhy(String value) {
        runner.withPropertyValues("etserve.cuda.enabled=" + value).run(ctx -> {
            assertThat(ctx).hasNotFailed();
            assertThat(ctx.getBeanNamesForType(CudaRuntime.class)).containsExactly("cudaDisabled");
            assertThat(ctx.getBean(CudaRuntime.class).available()).isFalse();
            assertThat(ctx.getBean(CudaRuntime.class).unavailableReason()).contains(DISABLED);
            assertThat(ctx.getBean(StreamPools.class).whyNone()).contains(DISABLED);
            assertThat(ctx.getBean(TensorRtProbe.class).available()).isFalse();
        });
    }

    @Test
    void yamlsBooleanFalseSwitchesItOffToo() {
        runner.withInitializer(ctx -> ctx.getEnvironment().getPropertySources()
                        .addFirst(new MapPropertySource("yaml", Map.of("etserve.cuda.enabled", Boolean.FALSE))))
                .run(ctx -> assertThat(ctx.getBeanNamesForType(CudaRuntime.class)).containsExactly("cudaDisabled"));
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "auto", "AUTO"})
    void autoStartsCudaWhateverTheHostHas(String value) {
        var configured = value.isEmpty() ? runner : runner.withPropertyValues("etserve.cuda.enabled=" + value);
        configured.run(ctx -> {
            assertThat(ctx).hasNotFailed();
            assertThat(ctx.getBeanNamesForType(CudaRuntime.class)).containsExactly("cudaRuntime");
            // Without a GPU the reason is the probe's (no driver...), never the configuration's.
            assertThat(ctx.getBean(CudaRuntime.class).unavailableReason().orElse("")).doesNotContain("disabled");
        });
    }

    @Test
    void aMisspeltValueStopsStartupNamingTheProperty() {
        runner.withPropertyValues("etserve.cuda.enabled=maybe").run(ctx -> {
            assertThat(ctx).hasFailed();
            assertThat(ctx.getStartupFailure()).hasStackTraceContaining("etserve.cuda.enabled");
        });
    }

    @Test
    void aStreamFactoryBeanGivesPoolsEvenWithCudaOff() {
        runner.withPropertyValues("etserve.cuda.enabled=false", "etserve.cuda.streams-per-device=3")
                .withBean(StreamFactory.class, () -> new OpaqueStreamFactory(List.of(0, 1)))
                .run(ctx -> {
                    StreamPools pools = ctx.getBean(StreamPools.class);
                    assertThat(pools.all()).extracting(StreamPool::device).containsExactly(0, 1);
                    assertThat(ctx.getBean(MeterRegistry.class).find("etserve_stream_lease_wait").timers()).hasSize(2);
                });
    }
}
