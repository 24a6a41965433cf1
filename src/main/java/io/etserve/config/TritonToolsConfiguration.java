package io.etserve.config;

import io.etserve.cuda.StreamPool;
import io.etserve.cuda.StreamPools;
import io.etserve.metrics.TritonMetrics;
import io.etserve.repository.ModelRegistry;
import io.etserve.repository.RepositoryControl;
import io.etserve.triton.TritonExtensions;
import java.util.stream.Collectors;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/** Triton's model configuration and statistics extensions, and loads with a configuration. */
@Configuration(proxyBeanMethods = false)
class TritonToolsConfiguration {

    @Bean
    TritonExtensions tritonExtensions(ModelRegistry registry, RepositoryControl repository, TritonMetrics metrics,
            StreamPools pools) {
        return new TritonExtensions(registry, repository, metrics,
                pools.all().stream().map(StreamPool::device).collect(Collectors.toSet()));
    }
}
