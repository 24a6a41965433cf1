package io.etserve.config;

import io.etserve.execution.InferenceService;
import io.etserve.execution.InferenceSpans;
import io.etserve.health.CudaFaultMonitor;
import io.etserve.inference.InflightBytes;
import io.etserve.metrics.TritonMetrics;
import io.etserve.protocol.PublicMessages;
import io.etserve.repository.ModelRegistry;
import io.etserve.resilience.ResilientAdmission;
import io.etserve.runtime.DirectBufferPool;
import io.etserve.sharedmemory.SharedMemoryRegions;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The inference path that REST and gRPC share ({@code etserve.inference.*}): the service that
 * admits and runs a call, the tensor buffers it reuses, the request bytes both may hold at once,
 * and the messages the public port may show.
 */
@Configuration(proxyBeanMethods = false)
class InferenceConfiguration {

    /** Tensor buffers reused across requests (request sections, JSON-decoded inputs, outputs). */
    @Bean
    DirectBufferPool tensorBuffers(EtServeProperties props) {
        return new DirectBufferPool(props.inference().tensorBufferPool().toBytes());
    }

    /** Request bytes held at once, REST's bodies and gRPC's messages together. */
    @Bean
    InflightBytes inflightBytes(EtServeProperties props) {
        return new InflightBytes(props.inference().maxInflightRequestBytes().toBytes());
    }

    @Bean
    PublicMessages publicMessages(EtServeProperties props) {
        return new PublicMessages(props.modelRepository());
    }

    /**
     * Traced when {@link TracingConfiguration} provides spans, {@link InferenceSpans#OFF} otherwise;
     * outputs asked for in shared memory written there as each call's last step.
     */
    @Bean
    InferenceService inferenceService(ModelRegistry registry, EtServeProperties props, TritonMetrics metrics,
            ResilientAdmission admission, CudaFaultMonitor faults, DirectBufferPool tensorBuffers,
            ObjectProvider<InferenceSpans> spans, SharedMemoryRegions sharedMemory) {
        return new InferenceService(registry, props.inference().queueTimeout(), metrics, admission, faults,
                tensorBuffers, spans.getIfAvailable(() -> InferenceSpans.OFF), sharedMemory);
    }
}
