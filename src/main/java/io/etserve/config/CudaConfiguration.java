package io.etserve.config;

import io.etserve.cuda.CudaEarlyStart;
import io.etserve.cuda.CudaRuntime;
import io.etserve.cuda.CudaStreamFactory;
import io.etserve.cuda.StreamFactory;
import io.etserve.cuda.StreamPool;
import io.etserve.cuda.StreamPools;
import io.etserve.cuda.TensorRtProbe;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * CUDA, TensorRT and the stream pools ({@code etserve.cuda.*}). Only {@code enabled=false} is
 * known before startup; whether a usable GPU exists is found by starting CUDA, so these beans
 * exist on every host and say "unavailable" when there is none (health, metrics and model
 * placement read them). Spring destroys beans in reverse dependency order: the models, which
 * lease streams, are freed before the pools.
 */
@Configuration(proxyBeanMethods = false)
class CudaConfiguration {

    private static final Logger log = LoggerFactory.getLogger(CudaConfiguration.class);

    /**
     * {@code etserve.cuda.enabled} {@code auto} or {@code true} (the condition matches any value
     * but {@code false}, as {@link CudaEarlyStart} reads it): start CUDA and
     * prepare each device; {@code true} refuses to start without it.
     */
    @Bean
    @ConditionalOnProperty(name = "etserve.cuda.enabled", matchIfMissing = true)
    CudaRuntime cudaRuntime(EtServeProperties props) {
        CudaRuntime cuda = CudaRuntime.started();
        if (!cuda.available()) {
            if (props.cuda().enabled() == EtServeProperties.CudaMode.TRUE) {
                throw new IllegalStateException("etserve.cuda.enabled=true but " + cuda.unavailableReason().orElse("?"));
            }
            log.info("running CPU-only: {}", cuda.unavailableReason().orElse("?"));
        } else {
            log.info("CUDA driver {} runtime {}, devices {}", cuda.driverVersion(), cuda.runtimeVersion(),
                    cuda.devices());
            for (CudaRuntime.Device d : cuda.devices()) {
                cuda.prepare(d.ordinal(), props.cuda().deviceSchedule()).ifPresent(problem ->
                        log.warn("device {}: {} (it serves with CUDA's defaults there)", d.ordinal(), problem));
            }
        }
        return cuda;
    }

    /** {@code etserve.cuda.enabled=false}: CPU only, and CUDA's libraries are never loaded. */
    @Bean
    @ConditionalOnProperty(name = "etserve.cuda.enabled", havingValue = "false")
    CudaRuntime cudaDisabled() {
        return CudaRuntime.unavailable("CUDA disabled by configuration (etserve.cuda.enabled=false)");
    }

    @Bean
    TensorRtProbe tensorRt(CudaRuntime cuda) {
        return cuda.available() ? TensorRtProbe.started()
                : new TensorRtProbe(false, null, "TensorRT needs CUDA, which is unavailable");
    }

    /**
     * The pools. A {@link StreamFactory} bean, when one exists, wins over the JavaCPP one: that is
     * how tests on hosts without a GPU run the stream path with opaque handles.
     */
    @Bean(destroyMethod = "close")
    StreamPools streamPools(EtServeProperties props, CudaRuntime cuda, ObjectProvider<StreamFactory> custom,
            MeterRegistry meters) {
        EtServeProperties.Cuda c = props.cuda();
        StreamFactory factory = custom.getIfAvailable();
        if (factory == null) {
            if (!cuda.available()) {
                return StreamPools.none(cuda.unavailableReason().orElse("CUDA unavailable"));
            }
            factory = new CudaStreamFactory(cuda, c.completionWait(), c.sleepSlice(), c.completionTimeout());
        }
        List<Integer> visible = factory.devices();
        List<Integer> devices = c.devices().isEmpty() ? visible : c.devices();
        if (!new HashSet<>(visible).containsAll(devices)) {
            throw new IllegalStateException("etserve.cuda.devices=" + devices + " but the visible devices are " + visible);
        }
        Map<Integer, StreamPool> pools = new LinkedHashMap<>();
        for (int device : devices) {
            Timer wait = Timer.builder("etserve_stream_lease_wait").tag("device", Integer.toString(device))
                    .description("Time waiting for a free stream").register(meters);
            pools.put(device, new StreamPool(device, c.streamsPerDevice(), c.priority(), factory,
                    nanos -> wait.record(nanos, TimeUnit.NANOSECONDS)));
        }
        log.info("stream pools: {} streams on each of devices {}", c.streamsPerDevice(), devices);
        return new StreamPools(pools, null, c.drainTimeout());
    }
}
