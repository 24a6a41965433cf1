package io.etserve.config;

import io.etserve.metrics.ProtocolMetrics;
import io.etserve.rest.CoreInference;
import io.etserve.rest.InferHandler;
import io.etserve.rest.InferenceProtocolController;
import io.etserve.rest.ResumingThreadPool;
import io.etserve.security.RestrictedApis;
import java.time.Duration;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.SynchronousQueue;
import org.eclipse.jetty.util.BlockingArrayQueue;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.jetty.JettyServerCustomizer;
import org.springframework.boot.jetty.autoconfigure.JettyServerProperties;
import org.springframework.boot.jetty.servlet.JettyServletWebServerFactory;
import org.springframework.boot.web.server.Shutdown;
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

    private static final Logger log = LoggerFactory.getLogger(HttpConfiguration.class);

    /**
     * Spring Boot's Jetty factory as its auto-configuration makes it (the
     * {@code JettyServerCustomizer} beans added), with connectors whose buffers are leased through
     * {@link ReleaseOnceBufferPool}; the management port's child context builds the same class.
     */
    @Bean
    ReleaseOnceJettyFactory jettyServletWebServerFactory(ObjectProvider<JettyServerCustomizer> customizers) {
        ReleaseOnceJettyFactory factory = new ReleaseOnceJettyFactory();
        factory.getServerCustomizers().addAll(customizers.orderedStream().toList());
        return factory;
    }

    /**
     * {@link InferHandler} in front of the servlet context, unless tracing (a traced request's
     * server span comes from the servlet filter, {@link TracingConfiguration}) or the context has
     * a path of its own (the handler serves the protocol's paths from the server's root); with
     * {@code etserve.http.inline-below} (250us by default) or {@code inline-alone-below} (20ms) set,
     * calls may run on the selector that read them, there are
     * {@link EtServeProperties.Http#selectorsFor} selectors unless
     * {@code server.jetty.threads.selectors} says otherwise, and the request pool is a
     * {@link ResumingThreadPool} ({@code server.jetty.threads.*} request threads, and the
     * selectors and acceptor on top). With {@code server.shutdown: graceful} (the default here),
     * the requests in progress are counted by {@link ActiveRequests}. The core path's
     * collaborators are looked up at the first request: the server is built before them, and
     * asking for them here would build the inference beans ahead of it.
     */
    @Bean
    WebServerFactoryCustomizer<JettyServletWebServerFactory> jettyServer(EtServeProperties props,
            ObjectProvider<CoreInference> core, @Value("${etserve.tracing.enabled:false}") boolean tracing,
            @Value("${server.servlet.context-path:}") String contextPath, ObjectProvider<JettyServerProperties> jetty,
            @Value("${spring.threads.virtual.enabled:false}") boolean virtualThreads) {
        // With virtual threads Spring Boot's pool stays: requests go to it, none run on the selector.
        boolean onSelector = props.http().inlinesAny() && !virtualThreads;
        boolean atRoot = contextPath.isEmpty() || contextPath.equals("/");
        return factory -> {
            factory.addServerCustomizers(new JettyServerSettings(props.http()));
            if (!tracing && atRoot && onSelector) {
                JettyServerProperties.Threads threads = jetty.getIfAvailable(JettyServerProperties::new).getThreads();
                int selectors = positive(threads.getSelectors()) ? threads.getSelectors()
                        : EtServeProperties.Http.selectorsFor(Runtime.getRuntime().availableProcessors());
                // Calls run on the selectors: Jetty's own count, min(cores / 2, max threads / 16),
                // would tie how many run at once to the request pool's size.
                factory.setSelectors(selectors);
                int acceptors = positive(threads.getAcceptors()) ? threads.getAcceptors() : 1;  // Jetty's default
                factory.setThreadPool(resumingPool(threads, selectors + acceptors));
                log.info("REST calls may run on the selector that read them (etserve.http.inline-below {},"
                        + " inline-alone-below {}): {} selectors, {} request threads",
                        asSetting(props.http().inlineBelow()), asSetting(props.http().inlineAloneBelow()), selectors,
                        requestThreads(threads));
            }
            if (!tracing && atRoot) {
                factory.addServerCustomizers(server -> InferHandler.install(server, core::getIfAvailable, onSelector));
            }
            if (factory.getShutdown() == Shutdown.GRACEFUL) {
                // Graceful shutdown counts requests in progress with ActiveRequests, in front of
                // everything, instead of the StatisticsHandler Spring Boot would put there.
                factory.setShutdown(Shutdown.IMMEDIATE);
                factory.addServerCustomizers(ActiveRequests::install);
            }
        };
    }

    /**
     * Spring Boot's request pool (JettyThreadPool's rules) as a {@link ResumingThreadPool}, with
     * {@code leased} threads more than {@code server.jetty.threads.max}: Jetty takes a thread of
     * the pool for each selector and acceptor for good, and with a selector per core a host of
     * as many cores as request threads would have none left (Jetty then refuses to start).
     */
    private static ResumingThreadPool resumingPool(JettyServerProperties.Threads threads, int leased) {
        Integer capacity = threads.getMaxQueueCapacity();
        BlockingQueue<Runnable> queue = capacity == null ? null
                : capacity == 0 ? new SynchronousQueue<>() : new BlockingArrayQueue<>(capacity);
        int max = requestThreads(threads);
        int min = threads.getMin() != null ? threads.getMin() : 8;
        int idle = threads.getIdleTimeout() != null ? (int) threads.getIdleTimeout().toMillis() : 60_000;
        return new ResumingThreadPool(max + leased, min + leased, idle, queue);
    }

    /** {@code server.jetty.threads.max}, or Spring Boot's default, 200, when unset. */
    private static int requestThreads(JettyServerProperties.Threads threads) {
        return threads.getMax() != null ? threads.getMax() : 200;
    }

    /** {@code 250us}, {@code 20ms} or {@code off}: a threshold as application.yml writes it. */
    private static String asSetting(Duration threshold) {
        long nanos = threshold.toNanos();
        if (nanos == 0) {
            return "off";
        }
        return nanos % 1_000_000 == 0 ? nanos / 1_000_000 + "ms" : nanos / 1_000 + "us";
    }

    private static boolean positive(Integer value) {
        return value != null && value > 0;
    }

    @Bean
    CoreInference coreInference(InferenceProtocolController controller, RestrictedApis restricted,
            ProtocolMetrics metrics, EtServeProperties props) {
        return controller.core(restricted, metrics, props.http().inputBufferSize().toBytes(),
                props.http().inlineBelow(), props.http().inlineAloneBelow());
    }
}
