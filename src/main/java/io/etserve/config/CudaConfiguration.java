package io.etserve.config;

import io.etserve.cuda.CudaRuntime;
import io.etserve.cuda.CudaStreamFactory;
import io.etserve.cuda.StreamFactory;
import io.etserve.cuda.StreamPool;
import io.etserve.cuda.StreamPools;
import io.etserve.cuda.TensorRtProbe;
import io.etserve.health.CallerStreamCheck;
import io.etserve.repository.NodeCapabilities;
import io.etserve.runtime.NativeRuntime;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The native side of the service: the ExecuTorch bridge, CUDA, TensorRT and the stream pools.
 * Order matters and Spring's dependency graph keeps it: the bridge loads first; on shutdown,
 * models (which depend on the pools) are freed before the streams.
 */
@Configuration(proxyBeanMethods = false)
public class RuntimeConfiguration {

    private static final Logger log = LoggerFactory.getLogger(RuntimeConfiguration.class);

    @Bean
    NativeRuntime.Info nativeRuntime(EtServeProperties props) {
        EtServeProperties.Native n = props.nativeRuntime();
        Path extract = n.extractDir() != null ? n.extractDir()
                : Path.of(System.getProperty("java.io.tmpdir"), "etserve-native");
        NativeRuntime.Info info = NativeRuntime.load(
                new NativeRuntime.Options(Optional.ofNullable(n.libraryDir()), extract, n.extraLibraries()));
        log.info("ExecuTorch bridge loaded from {}; delegates registered: {}", info.directory(),
                info.registeredBackends());
        return info;
    }

    @Bean
    CallerStreamCheck callerStreamCheck(NativeRuntime.Info nativeRuntime, EtServeProperties props) {
        CallerStreamCheck check = new CallerStreamCheck();
        CallerStreamCheck.Result r = check.check();
        if (r.ok()) {
            log.info(r.summary());
        } else if (props.health().failFastCallerStream()) {
            throw new IllegalStateException("Refusing to start: " + r.summary()
                    + " (set etserve.health.fail-fast-caller-stream=false to start anyway, reporting DOWN)");
        } else {
            log.error(r.summary());
        }
        return check;
    }

    @Bean
    CudaRuntime cudaRuntime(EtServeProperties props) {
        EtServeProperties.CudaMode mode = props.cuda().enabled();
        if (mode == EtServeProperties.CudaMode.FALSE) {
            return CudaRuntime.unavailable("CUDA disabled by configuration (etserve.cuda.enabled=false)");
        }
        CudaRuntime cuda = CudaRuntime.started();
        if (!cuda.available()) {
            if (mode == EtServeProperties.CudaMode.TRUE) {
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

    @Bean
    TensorRtProbe tensorRt(CudaRuntime cuda) {
        return cuda.available() ? TensorRtProbe.probe()
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
            factory = new CudaStreamFactory(cuda, c.completionWait(), c.sleepSlice());
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

    @Bean
    NodeCapabilities nodeCapabilities(NativeRuntime.Info nativeRuntime, CudaRuntime cuda, TensorRtProbe tensorRt) {
        return new NodeCapabilities(new HashSet<>(nativeRuntime.registeredBackends()), cuda, tensorRt);
    }
}
