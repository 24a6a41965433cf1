package io.etserve.config;

import io.etserve.cuda.CudaRuntime;
import io.etserve.cuda.StreamPool;
import io.etserve.cuda.StreamPools;
import io.etserve.cuda.TensorRtProbe;
import io.etserve.health.CallerStreamCheck;
import io.etserve.health.CudaFaultMonitor;
import io.etserve.metrics.TritonMetrics;
import io.etserve.protocol.DecodeLimits;
import io.etserve.protocol.InferRequestDecoder;
import io.etserve.repository.DevicePlacement;
import io.etserve.repository.ModelLoader;
import io.etserve.repository.ModelRegistry;
import io.etserve.repository.NodeCapabilities;
import io.etserve.repository.ProgramIntegrity;
import io.etserve.repository.RepositoryControl;
import io.etserve.repository.RepositoryPoller;
import io.etserve.repository.UnreleasedDeviceMemory;
import io.etserve.runtime.FirstCallTrial;
import io.etserve.runtime.NativeRuntime;
import io.etserve.runtime.Program;
import java.util.HashSet;
import org.slf4j.LoggerFactory;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The model repository ({@code etserve.model-repository}, {@code etserve.repository.*}): what
 * this node can run, the loader and registry that serve each model's versions, and the control
 * of what loads when (startup, poll, explicit).
 */
@Configuration(proxyBeanMethods = false)
class ModelRepositoryConfiguration {

    @Bean
    NodeCapabilities nodeCapabilities(NativeRuntime.Info nativeRuntime, CudaRuntime cuda, TensorRtProbe tensorRt) {
        return new NodeCapabilities(new HashSet<>(nativeRuntime.registeredBackends()), cuda, tensorRt);
    }

    /** Loads every model at startup; closing it unloads them before the stream pools go. */
    @Bean(initMethod = "loadAll", destroyMethod = "close")
    ModelRegistry modelRegistry(EtServeProperties props, StreamPools pools, NodeCapabilities node,
            CallerStreamCheck callerStreamChecked, TritonMetrics metrics, CudaFaultMonitor faults) {
        // Both bound as enums: a misspelt value stops startup naming the property and its values.
        Program.Verification verification = props.nativeRuntime().verification();
        DevicePlacement.Policy placement = props.cuda().placement();
        // Warm-up files are request bodies: read by the REST decoder, within the same limits.
        DecodeLimits limits = new DecodeLimits(props.inference().maxElementsPerTensor(), props.inference().maxInputs());
        InferRequestDecoder decoder = new InferRequestDecoder();
        var gpuBackends = new HashSet<>(props.cuda().gpuBackends());
        // A GPU program's trial runs on the first device served (CUDA's ordinal 0 where none is).
        int trialDevice = pools.all().stream().mapToInt(StreamPool::device).findFirst().orElse(0);
        var firstCall = new FirstCallTrial(props.repository().firstCallTrial(),
                props.repository().firstCallTrialTimeout(), gpuBackends, trialDevice);
        ModelLoader loader = new ModelLoader(new ProgramIntegrity.Policy(verification, props.repository().requireDigest()),
                firstCall, pools, node,
                new ModelLoader.Instances(props.inference().defaultInstances(), props.cuda().defaultInstances()),
                gpuBackends, props.inference().maxElementsPerTensor(), placement,
                new ModelLoader.PlannedMemoryLimits(props.inference().maxPlannedMemory().toBytes(),
                        props.inference().maxPlannedMemoryPerModel().toBytes()), props.repository().copies(),
                props.inference().queuePolicy().policy(), body -> decoder.decode(body, null, limits), faults);
        if (verification == Program.Verification.MINIMAL) {
            LoggerFactory.getLogger(ModelLoader.class).info("etserve.native.verification=minimal applies "
                    + "only to programs whose declared sha256 matches; the others are verified fully");
        }
        ModelRegistry registry = new ModelRegistry(props.modelRepository(), loader, metrics);
        registry.setDrainTimeout(props.repository().drainTimeout());
        registry.setLoadThreads(props.repository().loadThreads());
        registry.setUnreleasedDeviceMemory(new UnreleasedDeviceMemory(props.repository().unreleasedDeviceMemory()));
        return registry;
    }

    @Bean
    RepositoryControl repositoryControl(ModelRegistry registry, EtServeProperties props) {
        return new RepositoryControl(registry, props.repository().mode());
    }

    /** {@code etserve.repository.mode=poll}: what changes on disk loads, reloads or unloads. */
    @Bean
    @ConditionalOnProperty(name = "etserve.repository.mode", havingValue = "poll")
    RepositoryPoller repositoryPoller(ModelRegistry registry, EtServeProperties props) {
        return new RepositoryPoller(registry, props.repository().pollInterval());
    }
}
