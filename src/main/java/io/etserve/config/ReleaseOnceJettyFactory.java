package io.etserve.config;

import java.net.InetSocketAddress;
import org.eclipse.jetty.server.AbstractConnector;
import org.eclipse.jetty.server.Server;
import org.springframework.boot.jetty.servlet.JettyServletWebServerFactory;

/**
 * Spring Boot's Jetty factory, its connectors taking their buffers through a
 * {@link ReleaseOnceBufferPool} over the server's pool (the one hook Jetty leaves: a connector's
 * pool is fixed when it is built; {@code server.ssl}'s customizer builds a connector of its own,
 * without it). Public with a no-argument constructor because the management port's child context
 * builds its own server from the parent factory's class.
 */
public class ReleaseOnceJettyFactory extends JettyServletWebServerFactory {

    @Override
    protected AbstractConnector createConnector(InetSocketAddress address, Server server) {
        return createConnector(address, server, null, null, new ReleaseOnceBufferPool(server.getByteBufferPool()));
    }
}
