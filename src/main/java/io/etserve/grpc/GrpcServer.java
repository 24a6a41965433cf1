package io.etserve.grpc;

import io.etserve.grpc.protocol.GRPCInferenceServiceGrpc;
import io.etserve.health.ProbeHealth;
import io.etserve.inference.InflightBytes;
import io.etserve.inference.UntrustedText;
import io.grpc.BindableService;
import io.grpc.DecompressorRegistry;
import io.grpc.Server;
import io.grpc.ServerInterceptors;
import io.grpc.Status;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.netty.shaded.io.netty.channel.EventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.IoHandlerFactory;
import io.grpc.netty.shaded.io.netty.channel.MultiThreadIoEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.epoll.Epoll;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollIoHandler;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollServerSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.nio.NioIoHandler;
import io.grpc.netty.shaded.io.netty.channel.socket.nio.NioServerSocketChannel;
import io.grpc.netty.shaded.io.netty.util.ResourceLeakDetector;
import io.grpc.netty.shaded.io.netty.util.concurrent.DefaultThreadFactory;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.context.SmartLifecycle;

/**
 * The gRPC port ({@code etserve.grpc.port}, 8001 as Triton's): the inference service and
 * {@code grpc.health.v1.Health}, which answers as readiness does. Started after the context is
 * ready and stopped before the web server's graceful shutdown ends: calls in flight finish
 * (up to {@code drainTimeout}), new ones are refused.
 */
public final class GrpcServer implements SmartLifecycle {

    private static final Logger log = LoggerFactory.getLogger(GrpcServer.class);

    private final String address;
    private final int port;
    private final int maxMessageBytes;
    private final int threads;
    private final int eventLoops;
    private final Duration drainTimeout;
    private final BindableService inference;
    private final EventLoopCalls onEventLoop;
    private final ProbeHealth probes;
    private final InflightBytes inflight;
    private final InPlaceRequests inPlace;
    private volatile Server server;
    /** A stop is draining the server: a second stop does not start another drain. */
    private final AtomicBoolean draining = new AtomicBoolean();
    private volatile ExecutorService executor;
    private volatile EventLoopGroup acceptLoop;
    private volatile EventLoopGroup loops;
    private volatile CallOnWorker calls;

    /**
     * @param onEventLoop which calls may run on the event loop that read them ({@link CallOnWorker})
     * @param inflight the request bytes held at once, REST's and gRPC's together ({@link InflightMessages})
     * @param inPlace which of {@code inference}'s requests are parsed over the transport's buffers
     * @param eventLoops Netty's event-loop threads reading and writing the connections
     */
    public GrpcServer(String address, int port, int maxMessageBytes, int threads, int eventLoops,
            Duration drainTimeout, BindableService inference, EventLoopCalls onEventLoop, ProbeHealth probes,
            InflightBytes inflight, InPlaceRequests inPlace) {
        this.address = address;
        this.port = port;
        this.maxMessageBytes = maxMessageBytes;
        this.threads = threads;
        this.eventLoops = eventLoops;
        this.drainTimeout = drainTimeout;
        this.inference = inference;
        this.onEventLoop = onEventLoop;
        this.probes = probes;
        this.inflight = inflight;
        this.inPlace = inPlace;
    }

    @Override
    public void start() {
        // Netty's classes are being initialized on their own thread (NettyEarlyInit): only that
        // thread may initialize them until it is done.
        NettyEarlyInit.await();
        leakDetectionOffUnlessAsked();
        AtomicInteger n = new AtomicInteger();
        // Bounded like the web server's request threads: a call's handler runs its forward on one
        // of these (CallOnWorker); the transport's callbacks stay on Netty's event loop.
        ThreadPoolExecutor pool = new ThreadPoolExecutor(threads, threads, 60, TimeUnit.SECONDS,
                new LinkedBlockingQueue<>(), r -> {
                    Thread t = new Thread(r, "grpc-" + n.incrementAndGet());
                    t.setDaemon(true);
                    return t;
                });
        pool.allowCoreThreadTimeOut(true);
        InetSocketAddress bind = address == null || address.isBlank() ? new InetSocketAddress(port)
                : new InetSocketAddress(address, port);
        CallOnWorker onWorker = new CallOnWorker(pool, onEventLoop);
        // The server's own loops, as many as asked (EtServeProperties.Grpc#eventLoopsFor), rather
        // than grpc-java's shared group of two per core.
        boolean epoll = Epoll.isAvailable();
        IoHandlerFactory io = epoll ? EpollIoHandler.newFactory() : NioIoHandler.newFactory();
        EventLoopGroup accept = new MultiThreadIoEventLoopGroup(1, new DefaultThreadFactory("grpc-accept", true), io);
        EventLoopGroup workerLoops = new MultiThreadIoEventLoopGroup(eventLoops,
                new DefaultThreadFactory("grpc-loop", true), io);
        try {
            server = NettyServerBuilder.forAddress(bind).bossEventLoopGroup(accept).workerEventLoopGroup(workerLoops)
                    .channelType(epoll ? EpollServerSocketChannel.class : NioServerSocketChannel.class)
                    .directExecutor().addTransportFilter(onWorker.connections())
                    .maxInboundMessageSize(maxMessageBytes).addStreamTracerFactory(new InflightMessages(inflight))
                    .decompressorRegistry(DecompressorRegistry.getDefaultInstance().with(DeflateCodec.INSTANCE, true)
                            .with(GzipCodec.INSTANCE, true))
                    .addService(UnreadableMessages.refuse(inPlace.parseInPlace(
                            ServerInterceptors.intercept(inference, inPlace, onWorker))))
                    .addService(UnreadableMessages.refuse(ServerInterceptors.intercept(new ReadinessHealth(probes),
                            onWorker))).build().start();
        } catch (IOException e) {
            pool.shutdownNow();
            stopNow(accept, workerLoops);
            throw new UncheckedIOException("cannot listen for gRPC on " + bind + ": " + e.getMessage(), e);
        }
        executor = pool;
        acceptLoop = accept;
        loops = workerLoops;
        calls = onWorker;
        log.info("gRPC (Open Inference Protocol) listening on {}, {} event loops", server.getListenSockets(),
                eventLoops);
    }

    /** Shuts the server's event loops down without a quiet period: no connection is left on them. */
    private static void stopNow(EventLoopGroup... groups) {
        for (EventLoopGroup group : groups) {
            group.shutdownGracefully(0, 0, TimeUnit.SECONDS);
        }
    }

    /** The system properties that set Netty's leak detection (as gRPC's shaded copy reads them). */
    static final List<String> LEAK_DETECTION_PROPERTIES = List.of("io.grpc.netty.shaded.io.netty.leakDetection.level",
            "io.grpc.netty.shaded.io.netty.leakDetectionLevel");

    /**
     * Netty's leak detector, on by default, follows one buffer in 128 and records a stack trace
     * at its release: event-loop CPU on every small call (bench/results/2026-12-06-h100-grpc-steady-state.md,
     * section 3) spent finding leaks in gRPC's own buffer handling, which the service does not
     * touch. Off, unless set with one of
     * {@link #LEAK_DETECTION_PROPERTIES} (e.g. {@code -Dio.grpc.netty.shaded.io.netty.leakDetection.level=paranoid}
     * to look for one).
     */
    static void leakDetectionOffUnlessAsked() {
        if (LEAK_DETECTION_PROPERTIES.stream().noneMatch(property -> System.getProperty(property) != null)) {
            ResourceLeakDetector.setLevel(ResourceLeakDetector.Level.DISABLED);
        }
    }

    @Override
    public void stop() {
        Server s = server;
        if (s != null && draining.compareAndSet(false, true)) {
            drain(s);
        }
    }

    /**
     * Stops taking calls and drains on a thread of its own: Spring stops a phase's beans one
     * after the other, and a drain here would hold the web server's graceful shutdown (same
     * phase) back until it ended, so the two would take twice the phase's timeout.
     */
    @Override
    public void stop(Runnable done) {
        Server s = server;
        if (s == null || !draining.compareAndSet(false, true)) {
            done.run();  // stopped, or a drain already under way answers for it
            return;
        }
        Thread drain = new Thread(() -> {
            try {
                drain(s);
            } finally {
                done.run();
            }
        }, "grpc-drain");
        drain.setDaemon(true);
        drain.start();
    }

    private void drain(Server s) {
        s.shutdown();
        try {
            // A little under the phase's timeout: cancelled calls end inside the phase Spring waits for.
            long wait = drainTimeout.toMillis() - Math.min(drainTimeout.toMillis() / 10, 2_000);
            if (!s.awaitTermination(wait, TimeUnit.MILLISECONDS)) {
                log.warn("gRPC calls still running after {}; cancelling them", drainTimeout);
                s.shutdownNow();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            s.shutdownNow();
        }
        executor.shutdown();
        // The server has terminated (or been told to stop at once): nothing is left to read or write.
        stopNow(acceptLoop, loops);
        server = null;
        draining.set(false);
    }

    @Override
    public boolean isRunning() {
        return server != null;
    }

    /** With the web server's graceful shutdown (same phase): both drain at once; starts after the web server. */
    @Override
    public int getPhase() {
        return Integer.MAX_VALUE - 1024;
    }

    /**
     * Calls run to their answer on the event loop that read them (etserve.grpc.inline-*), not
     * handed to a worker, since start.
     */
    public long callsOnEventLoop() {
        CallOnWorker c = calls;
        return c == null ? 0 : c.handledOnEventLoop();
    }

    /** The port it listens on (the one asked for, or the one picked when that was 0). */
    public int port() {
        Server s = server;
        if (s == null) {
            throw new IllegalStateException("the gRPC server is not running");
        }
        return s.getPort();
    }

    /**
     * {@code grpc.health.v1.Health}: SERVING exactly when readiness is UP, for the server as a
     * whole (the empty name, what Kubernetes' gRPC probe asks by default) and for the inference
     * service by its name; any other name is NOT_FOUND, as the health protocol says.
     */
    static final class ReadinessHealth extends HealthGrpc.HealthImplBase {
        private static final String INFERENCE = GRPCInferenceServiceGrpc.SERVICE_NAME;

        private final ProbeHealth probes;

        ReadinessHealth(ProbeHealth probes) {
            this.probes = probes;
        }

        @Override
        public void check(HealthCheckRequest request, StreamObserver<HealthCheckResponse> out) {
            String service = request.getService();
            if (!service.isEmpty() && !service.equals(INFERENCE)) {
                out.onError(Status.NOT_FOUND.withDescription("no service '"
                        + UntrustedText.abbreviate(service) + "' here; ask for '' or '" + INFERENCE + "'")
                        .asRuntimeException());
                return;
            }
            out.onNext(HealthCheckResponse.newBuilder().setStatus(probes.readiness() == 200
                    ? HealthCheckResponse.ServingStatus.SERVING : HealthCheckResponse.ServingStatus.NOT_SERVING).build());
            out.onCompleted();
        }
    }
}
