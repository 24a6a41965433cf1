package io.etserve.repository;

import java.time.Duration;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.context.SmartLifecycle;

/**
 * The repository's poll mode ({@code etserve.repository.mode=poll}): every interval, what changed
 * on disk loads, reloads or unloads once it has held still for one interval
 * ({@link ModelRegistry#poll()}), on one thread of its own.
 */
public final class RepositoryPoller implements SmartLifecycle {

    private static final Logger log = LoggerFactory.getLogger(RepositoryPoller.class);

    private final ModelRegistry registry;
    private final Duration interval;
    private volatile ScheduledExecutorService scheduler;

    public RepositoryPoller(ModelRegistry registry, Duration interval) {
        this.registry = registry;
        this.interval = interval;
    }

    @Override
    public void start() {
        ScheduledExecutorService s = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "etserve-repository-poll");
            t.setDaemon(true);
            return t;
        });
        s.scheduleWithFixedDelay(() -> {
            try {
                registry.poll();
            } catch (RuntimeException | StackOverflowError | OutOfMemoryError e) {
                // Anything thrown out of here would cancel the schedule: polling would stop unseen.
                log.warn("repository poll failed: {}", e.toString());
            }
        }, interval.toMillis(), interval.toMillis(), TimeUnit.MILLISECONDS);
        scheduler = s;
    }

    @Override
    public void stop() {
        ScheduledExecutorService s = scheduler;
        if (s != null) {
            s.shutdownNow();
            scheduler = null;
        }
    }

    @Override
    public boolean isRunning() {
        return scheduler != null;
    }
}
