package io.etserve.config;

import io.etserve.metrics.ProtocolMetrics;
import io.etserve.rest.InferenceProtocolController;
import io.etserve.rest.CoreInference;
import io.etserve.rest.InferHandler;
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
 * serves the usual {@code /infer} request through Jetty's core API ({@link InferHandler}).
 */
@Configuration(proxyBeanMethods = false)
class HttpConfiguration {

    /**
     * {@link InferHandler} in front of the servlet context, unless tracing (a traced request's
     * server span comes from the servlet filter, {@link TracingConfiguration}); with
     * {@code etserve.http.inline-below} set, quick calls run on the selector that read them. The
     * core path's collaborators are looked up at the first request: the server is built before
     * them, and asking for them here would build the inference beans ahead of it.
     */
    @Bean
    WebServerFactoryCustomizer<JettyServletWebServerFactory> jettyServer(EtServeProperties props,
            ObjectProvider<CoreInference> core, @Value("${etserve.tracing.enabled:false}") boolean tracing) {
        boolean onSelector = !props.http().inlineBelow().isZero();
        return factory -> {
            factory.addServerCustomizers(new JettyServerSettings(props.http()));
            if (!tracing) {
                factory.addServerCustomizers(server -> InferHandler.install(server, core::getIfAvailable, onSelector));
            }
        };
    }

    @Bean
    CoreInference coreInference(InferenceProtocolController controller, RestrictedApis restricted,
            ProtocolMetrics metrics, EtServeProperties props) {
        return controller.core(restricted, metrics, props.http().inputBufferSize().toBytes(),
                props.http().inlineBelow());
    }
}
