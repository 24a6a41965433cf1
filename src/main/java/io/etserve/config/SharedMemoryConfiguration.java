package io.etserve.config;

import io.etserve.sharedmemory.SharedMemoryRegions;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Triton's system shared-memory extension ({@code etserve.shared-memory.*}): the regions both
 * protocols register and their inference calls read and write. A request's inputs in shared
 * memory are bounded together as its body is ({@code etserve.inference.max-request-size}).
 */
@Configuration(proxyBeanMethods = false)
class SharedMemoryConfiguration {

    @Bean
    SharedMemoryRegions sharedMemoryRegions(EtServeProperties props) {
        return new SharedMemoryRegions(SharedMemoryRegions.POSIX_SHARED_MEMORY, props.sharedMemory().enabled(),
                props.sharedMemory().maxRegions(), props.inference().maxRequestSize().toBytes());
    }
}
