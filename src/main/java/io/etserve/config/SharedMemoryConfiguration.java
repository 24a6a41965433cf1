package io.etserve.config;

import io.etserve.cuda.CudaIpc;
import io.etserve.cuda.CudaRuntime;
import io.etserve.health.CudaFaultMonitor;
import io.etserve.sharedmemory.SharedMemoryRegions;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Triton's shared-memory extensions ({@code etserve.shared-memory.*}): the regions, system and
 * CUDA, that both protocols register and their inference calls read and write. A request's
 * inputs in shared memory are bounded together as its body is
 * ({@code etserve.inference.max-request-size}). CUDA regions need a CUDA device.
 */
@Configuration(proxyBeanMethods = false)
class SharedMemoryConfiguration {

    @Bean
    SharedMemoryRegions sharedMemoryRegions(EtServeProperties props, CudaRuntime cuda, CudaFaultMonitor faults) {
        return new SharedMemoryRegions(SharedMemoryRegions.POSIX_SHARED_MEMORY, props.sharedMemory().enabled(),
                props.sharedMemory().maxRegions(), props.inference().maxRequestSize().toBytes(),
                cuda.available() ? new CudaIpc(cuda) : null, cuda.unavailableReason().orElse("no CUDA device"),
                faults);
    }
}
