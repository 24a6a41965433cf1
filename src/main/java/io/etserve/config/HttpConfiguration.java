package io.etserve.config;

import io.etserve.metrics.ProtocolMetrics;
import io.etserve.rest.InferenceProtocolController;
import io.etserve.rest.InlineInferHandler;
import io.etserve.rest.InlineInference;
import io.etserve.security.RestrictedApis;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.jetty.servlet.JettyServletWebServerFactory;
import org.springframework.boot.web.server.WebServerFactoryCustomizer;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The public port's Jetty ({@code etserve.http.*}, see {@link JettyServerSettings}); the
 * management port gets the same from {@link ManagementServerConfiguration}. The public port alone
 * serves quick inference calls on the thread that read them ({@link InlineInferHandler}).
 */
@Configuration(proxyBeanMethods = false)
class HttpConfiguration {

    /**
     * With {@code etserve.http.inline-below} set (and no tracing: a traced request's server span
     * comes from the servlet filter, {@link TracingConfiguration}), quick calls run on the thread
     * that read them. The inline path's collaborators are looked up at the first request: the
     * server is built before them, and asking for them here would build the inference beans ahead of it.
     */
    @Bean
    WebServerFactoryCustomizer<JettyServletWebServerFactory> jettyServer(EtServeProperties props,
            ObjectProvider<InlineInference> inline, @Value("${etserve.tracing.enabled:false}") boolean tracing) {
        boolean inlineCalls = !props.http().inlineBelow().isZero() && !tracing;
        return factory -> {
            factory.addServerCustomizers(new JettyServerSettings(props.http()));
            if (inlineCalls) {
                factory.addServerCustomizers(server -> InlineInferHandler.install(server, inline::getIfAvailable));
            }
        };
    }

    @Bean
    InlineInference inlineInference(InferenceProtocolController controller, RestrictedApis restricted,
            ProtocolMetrics metrics, EtServeProperties props) {
        return controller.inline(restricted, metrics, props.http().inputBufferSize().toBytes(),
                props.http().inlineBelow());
    }
}
