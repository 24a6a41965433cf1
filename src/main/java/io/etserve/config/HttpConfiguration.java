package io.etserve.config;

import org.springframework.boot.jetty.servlet.JettyServletWebServerFactory;
import org.springframework.boot.web.server.WebServerFactoryCustomizer;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The public port's Jetty ({@code etserve.http.*}, see {@link JettyServerSettings}); the
 * management port gets the same from {@link ManagementServerConfiguration}.
 */
@Configuration(proxyBeanMethods = false)
class HttpConfiguration {

    @Bean
    WebServerFactoryCustomizer<JettyServletWebServerFactory> jettyServer(EtServeProperties props) {
        return factory -> factory.addServerCustomizers(new JettyServerSettings(props.http()));
    }
}
