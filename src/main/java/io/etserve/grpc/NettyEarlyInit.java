package io.etserve.grpc;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicReference;
import org.springframework.boot.context.event.ApplicationEnvironmentPreparedEvent;
import org.springframework.context.ApplicationListener;
import org.springframework.core.env.Environment;

/**
 * Initializes the gRPC port's Netty classes while Spring builds the context. Netty's static
 * initialization (behind {@code NettyServerBuilder}: the JVM's capabilities probed, the epoll
 * transport, its buffer pools) took 40-70 ms of the main thread when {@link GrpcServer} started,
 * at the very end of a start (bench/results/2026-12-05-h100-startup-netty.md). Here one thread
 * does it from the moment the settings are known, and {@link GrpcServer#start} waits for it before
 * it touches Netty. Two threads initializing Netty's classes at once can deadlock (netty/netty
 * issues 5720, 7458, 11209); one thread doing all of it while the main thread touches none of
 * them until it has waited cannot: the main thread holds no class's initialization while it
 * waits. Registered in {@code META-INF/spring.factories}; off with gRPC
 * ({@code etserve.grpc.enabled=false}) or {@code etserve.grpc.early-init=false}.
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
            } catch (Throwable e) {
                // The server's start initializes what is left, and reports what fails.
            } finally {
                done.complete(null);
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

    /** Waits for the early initialization, if one was started; the caller may then use Netty. */
    static void await() {
        CompletableFuture<Void> done = started.get();
        if (done != null) {
            done.join();
        }
    }
}
