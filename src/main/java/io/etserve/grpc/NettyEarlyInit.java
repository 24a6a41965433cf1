package io.etserve.grpc;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicReference;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.boot.context.event.ApplicationEnvironmentPreparedEvent;
import org.springframework.context.ApplicationListener;
import org.springframework.core.env.Environment;

/**
 * Initializes the gRPC port's Netty classes while Spring builds the context. Netty's static
 * initialization (behind {@code NettyServerBuilder}: the JVM's capabilities probed, the epoll
 * transport, its buffer pools) ran on the main thread when {@link GrpcServer} started, at the
 * very end of a start (bench/results/2026-12-05-h100-startup-netty.md). Here a thread of
 * its own does it from the moment the settings are known, and {@link GrpcServer#start} waits for
 * it before it touches Netty. Two threads initializing Netty's classes at once can deadlock (netty/netty
 * issues 5720, 7458, 11209); here the main thread initializes none of Netty's own classes until
 * it has waited, and holds no class's initialization while it waits. (Both threads may still
 * initialize classes of gRPC's API and core, as the main thread builds the gRPC services; none of
 * those is known to initialize a Netty class or to wait on one.) A failure here is logged, with
 * its cause, when the server starts, whose own use of the class then fails as it would have
 * without this. Registered in
 * {@code META-INF/spring.factories}; off with gRPC ({@code etserve.grpc.enabled=false}) or
 * {@code etserve.grpc.early-init=false}.
 */
public final class NettyEarlyInit implements ApplicationListener<ApplicationEnvironmentPreparedEvent> {

    /** What the server's start initializes first; each pulls in the rest of Netty's static state. */
    static final List<String> CLASSES = List.of(
            "io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder",
            "io.grpc.netty.shaded.io.netty.buffer.PooledByteBufAllocator");

    private static final AtomicReference<CompletableFuture<Void>> started = new AtomicReference<>();

    @Override
    public void onApplicationEvent(ApplicationEnvironmentPreparedEvent event) {
        if (!wanted(event.getEnvironment()) || Boolean.getBoolean("spring.aot.processing")) {
            return;
        }
        CompletableFuture<Void> done = new CompletableFuture<>();
        if (!started.compareAndSet(null, done)) {
            return;  // a second application in this JVM (tests): Netty's classes are initialized once anyway
        }
        Thread thread = new Thread(() -> {
            try {
                initialize(NettyEarlyInit.class.getClassLoader());
                done.complete(null);
            } catch (Throwable e) {
                done.completeExceptionally(e);  // await() reports it: a class that failed here stays unusable
            }
        }, "netty-early-init");
        thread.setDaemon(true);
        thread.start();
    }

    /** Off when gRPC is disabled or {@code etserve.grpc.early-init=false}. */
    static boolean wanted(Environment env) {
        return env.getProperty("etserve.grpc.enabled", Boolean.class, true)
                && env.getProperty("etserve.grpc.early-init", Boolean.class, true);
    }

    static void initialize(ClassLoader loader) throws ClassNotFoundException {
        for (String name : CLASSES) {
            Class.forName(name, true, loader);
        }
    }

    /**
     * Waits for the early initialization, if one was started; the caller may then use Netty. A
     * failure there is logged with its cause (the caller's own use of the class then fails with
     * a {@code NoClassDefFoundError} that, before Java 21, does not carry it).
     */
    static void await() {
        CompletableFuture<Void> done = started.get();
        if (done == null) {
            return;
        }
        try {
            done.join();
        } catch (CompletionException e) {
            // (No static logger: this class is made with SpringApplication, before its logging starts.)
            Logger log = LoggerFactory.getLogger(NettyEarlyInit.class);
            log.warn("initializing Netty's classes for the gRPC port failed", e.getCause());
        }
    }
}
