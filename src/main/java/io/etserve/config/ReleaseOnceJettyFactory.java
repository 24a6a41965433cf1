package io.etserve.config;

import java.net.InetSocketAddress;
import org.eclipse.jetty.server.AbstractConnector;
import org.eclipse.jetty.server.Server;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.jetty.servlet.JettyServletWebServerFactory;
import org.springframework.context.EnvironmentAware;
import org.springframework.core.env.Environment;

/**
 * Spring Boot's Jetty factory, each connector taking its buffers through a
 * {@link ReleaseOnceBufferPool} over a {@link ConnectionBufferPool} of its own that keeps request
 * buffers of {@code etserve.http.input-buffer-size} (the one hook Jetty leaves: a connector's
 * pool is fixed when it is built). Public with a no-argument constructor because the management
 * port's child context builds its own server from the parent factory's class; it reads the input
 * buffer's size from the environment for the same reason.
 */
public class ReleaseOnceJettyFactory extends JettyServletWebServerFactory implements EnvironmentAware {

    private static final Logger log = LoggerFactory.getLogger(ReleaseOnceJettyFactory.class);

    private int inputBufferSize = ConnectionBufferPool.JETTY_DEFAULT_LARGEST;

    @Override
    public void setEnvironment(Environment environment) {
        // The same binding (defaults and checks) as EtServeProperties' own
        inputBufferSize = (int) Binder.get(environment).bindOrCreate("etserve.http", EtServeProperties.Http.class)
                .inputBufferSize().toBytes();
    }

    @Override
    protected AbstractConnector createConnector(InetSocketAddress address, Server server) {
        return createConnector(address, server, null, null,
                new ReleaseOnceBufferPool(new ConnectionBufferPool(inputBufferSize)));
    }

    @Override
    protected void customizeSsl(Server server, InetSocketAddress address) {
        // Spring Boot's SSL customizer replaces the connector with one of its own, built on the
        // server's pool: say so rather than leave it unsaid
        super.customizeSsl(server, address);
        log.warn("With SSL on port {} the connector takes Jetty's pool directly, without ReleaseOnceBufferPool's "
                + "guard against Jetty releasing a buffer twice (docs/operations.md, \"Malformed requests\"), and "
                + "keeps no request buffer above 64 KiB (etserve.http.input-buffer-size {} bytes)",
                address.getPort(), inputBufferSize);
    }
}
