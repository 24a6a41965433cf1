package io.etserve.config;

import io.etserve.execution.InferenceService;
import io.etserve.grpc.GrpcServer;
import io.etserve.grpc.InPlaceRequests;
import io.etserve.grpc.InferenceGrpcService;
import io.etserve.grpc.RestrictedApiInterceptor;
import io.etserve.grpc.protocol.GRPCInferenceServiceGrpc;
import io.etserve.health.ProbeHealth;
import io.etserve.health.ServerReadiness;
import io.etserve.inference.InflightBytes;
import io.etserve.metrics.ProtocolMetrics;
import io.etserve.protocol.DecodeLimits;
import io.etserve.protocol.PublicMessages;
import io.etserve.runtime.DirectBufferPool;
import io.etserve.repository.ModelRegistry;
import io.etserve.repository.RepositoryControl;
import io.etserve.security.RestrictedApis;
import io.etserve.sharedmemory.SharedMemoryRegions;
import io.etserve.tracing.GrpcTracingInterceptor;
import io.etserve.triton.TritonExtensions;
import io.grpc.BindableService;
import io.grpc.ServerInterceptors;
import java.time.Duration;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/** The gRPC port beside REST: the same services behind both ({@code etserve.grpc.*}). */
@Configuration(proxyBeanMethods = false)
@ConditionalOnProperty(name = "etserve.grpc.enabled", havingValue = "true", matchIfMissing = true)
class GrpcConfiguration {

    @Bean
    GrpcServer grpcServer(EtServeProperties props, ModelRegistry registry, InferenceService inference,
            ServerReadiness readiness, ProbeHealth probes, PublicMessages messages, ProtocolMetrics metrics,
            RepositoryControl repository, RestrictedApis restricted, TritonExtensions triton,
            ObjectProvider<GrpcTracingInterceptor> tracing, DirectBufferPool tensorBuffers, InflightBytes inflight,
            SharedMemoryRegions sharedMemory,
            @Value("${spring.lifecycle.timeout-per-shutdown-phase:30s}") Duration drainTimeout) {
        EtServeProperties.Grpc grpc = props.grpc();
        EtServeProperties.Inference limits = props.inference();
        long maxMessage = grpc.maxMessageSize() != null ? grpc.maxMessageSize().toBytes()
                : limits.maxRequestSize().toBytes();
        InPlaceRequests inPlace = new InPlaceRequests(GRPCInferenceServiceGrpc.getModelInferMethod());
        InferenceGrpcService service = new InferenceGrpcService(registry, inference, readiness, probes,
                new DecodeLimits(limits.maxElementsPerTensor(), limits.maxInputs()), messages,
                ServiceVersion.current(), TritonExtensions.served(sharedMemory.cudaServed()), metrics, repository,
                triton, tensorBuffers, inPlace, sharedMemory, inflight);
        return new GrpcServer(grpc.address(), grpc.port(), (int) Math.min(Integer.MAX_VALUE, maxMessage),
                grpc.threads(), grpc.eventLoopsFor(Runtime.getRuntime().availableProcessors()), drainTimeout,
                traced(RestrictedApiInterceptor.guard(service, restricted), tracing.getIfAvailable()),
                service.eventLoopCalls(grpc.inlineBelow(), grpc.inlineAloneBelow()), probes, inflight, inPlace);
    }

    /**
     * Outside the restriction, so refused calls are traced too (docs/tracing.md); a request that
     * is no valid protobuf message is refused before it, untraced (UnreadableMessages).
     */
    private static BindableService traced(BindableService service, GrpcTracingInterceptor tracing) {
        return tracing == null ? service : () -> ServerInterceptors.intercept(service, tracing);
    }
}
