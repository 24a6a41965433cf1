package io.etserve.config;

import java.net.InetSocketAddress;
import org.eclipse.jetty.server.AbstractConnector;
import org.eclipse.jetty.server.Server;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.boot.jetty.servlet.JettyServletWebServerFactory;

/**
 * Spring Boot's Jetty factory, its connectors taking their buffers through a
 * {@link ReleaseOnceBufferPool} over the server's pool (the one hook Jetty leaves: a connector's
 * pool is fixed when it is built). Public with a no-argument constructor because the management
 * port's child context builds its own server from the parent factory's class.
 */
public class ReleaseOnceJettyFactory extends JettyServletWebServerFactory {

    private static final Logger log = LoggerFactory.getLogger(ReleaseOnceJettyFactory.class);

    @Override
    protected AbstractConnector createConnector(InetSocketAddress address, Server server) {
        return createConnector(address, server, null, null, new ReleaseOnceBufferPool(server.getByteBufferPool()));
    }

    @Override
    protected void customizeSsl(Server server, InetSocketAddress address) {
        // Spring Boot's SSL customizer replaces the connector with one of its own, built on the
        // server's pool: say so rather than leave it unsaid
        super.customizeSsl(server, address);
        log.warn("With SSL on port {} the connector takes Jetty's pool directly, without ReleaseOnceBufferPool's "
                + "guard against Jetty releasing a buffer twice (docs/operations.md, \"Malformed requests\")",
                address.getPort());
    }
}
