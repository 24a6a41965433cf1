package io.etserve.health;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.boot.actuate.endpoint.ApiVersion;
import org.springframework.boot.actuate.endpoint.SecurityContext;
import org.springframework.boot.actuate.endpoint.jackson.EndpointJsonMapper;
import org.springframework.boot.actuate.endpoint.web.WebEndpointResponse;
import org.springframework.boot.actuate.endpoint.web.WebServerNamespace;
import org.springframework.boot.health.actuate.endpoint.HealthDescriptor;
import org.springframework.boot.health.actuate.endpoint.HealthEndpointWebExtension;

/**
 * Answers the health probes once, on a thread of its own, while the context finishes its start,
 * and throws the answers away. The first probe after a start otherwise paid, after everything
 * else was ready, for Jackson building the serializers of the health response and for the health
 * endpoint's first calls: on the image's start the single largest step between the application's
 * start and the first {@code 200} on {@code /actuator/health/readiness}
 * (bench/results/2026-12-05-startup-probe-warmup.md). Here the same endpoint extension and the
 * same JSON mapper the management port's Actuator answers with do that work while the main
 * thread starts the web servers and the management context. A failure changes nothing but the
 * first probe's time (logged at debug). Started once the singletons exist: the health indicators
 * it calls are then what an early probe of the management port calls too (the CUDA indicator's
 * JavaCPP classes included, all of whose libraries the beans loaded on the main thread). It stops
 * between answers when the context closes. Off with {@code etserve.health.warm-probes=false}.
 */
public final class ProbeWarmup implements SmartInitializingSingleton, DisposableBean {

    private static final Logger log = LoggerFactory.getLogger(ProbeWarmup.class);

    private final HealthEndpointWebExtension health;
    private final EndpointJsonMapper json;
    private final List<String> groups;
    private final boolean enabled;
    private volatile boolean closed;
    private volatile CompletableFuture<Integer> done = CompletableFuture.completedFuture(0);

    /**
     * @param health the endpoint's HTTP extension, null when not served over HTTP
     * @param json the mapper Actuator's answers are written with, null when not
     * @param groups the health groups whose answers to prepare ({@code ""} for {@code /actuator/health})
     * @param enabled false: do nothing (health and json may then be null)
     */
    public ProbeWarmup(HealthEndpointWebExtension health, EndpointJsonMapper json, List<String> groups,
            boolean enabled) {
        this.health = health;
        this.json = json;
        this.groups = List.copyOf(groups);
        this.enabled = enabled;
    }

    @Override
    public void afterSingletonsInstantiated() {
        if (!enabled) {
            return;
        }
        CompletableFuture<Integer> result = new CompletableFuture<>();
        done = result;
        Thread thread = new Thread(() -> {
            try {
                result.complete(run());
            } catch (Throwable e) {
                log.debug("Preparing the health probes' first answers failed; the first probe prepares them", e);
                result.completeExceptionally(e);
            }
        }, "probe-warmup");
        thread.setDaemon(true);
        thread.start();
    }

    /** Serializes each group's answer as the management port would; returns the bytes written. */
    int run() {
        int bytes = 0;
        for (String group : groups) {
            if (closed) {
                break;  // the context is closing (a failed start, a short test): its beans may be gone
            }
            WebEndpointResponse<HealthDescriptor> answer = group.isEmpty()
                    ? health.health(ApiVersion.LATEST, WebServerNamespace.MANAGEMENT, SecurityContext.NONE)
                    : health.health(ApiVersion.LATEST, WebServerNamespace.MANAGEMENT, SecurityContext.NONE, false,
                            group);
            if (answer.getBody() != null) {
                bytes += json.get().writeValueAsBytes(answer.getBody()).length;
            }
        }
        return bytes;
    }

    @Override
    public void destroy() {
        closed = true;
    }

    /** The warm-up's outcome: the bytes it serialized (0 when off), or its failure. */
    public CompletableFuture<Integer> done() {
        return done;
    }
}
