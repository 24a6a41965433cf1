package io.etserve.config;

import org.springframework.boot.actuate.autoconfigure.web.ManagementContextConfiguration;
import org.springframework.boot.actuate.autoconfigure.web.ManagementContextType;
import org.springframework.boot.jetty.servlet.JettyServletWebServerFactory;
import org.springframework.boot.web.server.WebServerFactoryCustomizer;
import org.springframework.context.annotation.Bean;

/**
 * The management port's own server (a child context, so the public port's customizers do not
 * reach it) gets the same Jetty settings. Registered in
 * {@code META-INF/spring/...ManagementContextConfiguration.imports}.
 */
@ManagementContextConfiguration(value = ManagementContextType.CHILD, proxyBeanMethods = false)
public class ManagementServerConfiguration {

    @Bean
    WebServerFactoryCustomizer<JettyServletWebServerFactory> managementJettyServer(EtServeProperties props) {
        return factory -> factory.addServerCustomizers(new JettyServerSettings(props.http()));
    }
}
