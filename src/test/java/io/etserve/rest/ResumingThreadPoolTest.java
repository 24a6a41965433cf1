package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import java.lang.reflect.Proxy;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.eclipse.jetty.io.Connection;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class ResumingThreadPoolTest {

    ResumingThreadPool pool;

    @BeforeEach
    void start() throws Exception {
        pool = new ResumingThreadPool(8, 2, 60_000, null);
        pool.start();
    }

    @AfterEach
    void stop() throws Exception {
        pool.stop();
    }

    /** A connection as Jetty resumes one: a {@link Connection} that is also the task reading it. */
    static Runnable connection(Runnable read) {
        return (Runnable) Proxy.newProxyInstance(ResumingThreadPoolTest.class.getClassLoader(),
                new Class<?>[] {Connection.class, Runnable.class}, (proxy, method, args) -> {
                    if (method.getName().equals("run")) {
                        read.run();
                    }
                    return null;
                });
    }

    @Test
    void aConnectionResumedByAHandedOverTaskIsReadAfterItOnTheSameThread() throws Exception {
        List<String> steps = new CopyOnWriteArrayList<>();
        CompletableFuture<Thread> resumedOn = new CompletableFuture<>();
        CompletableFuture<Thread> taskOn = new CompletableFuture<>();
        pool.execute(() -> ResumingThreadPool.runHere(() -> {
            taskOn.complete(Thread.currentThread());
            assertThat(ResumingThreadPool.onHandedOverThread()).isTrue();
            pool.execute(connection(() -> {
                steps.add("resumed");
                resumedOn.complete(Thread.currentThread());
            }));
            steps.add("task ends");
        }));
        assertThat(resumedOn.get(10, TimeUnit.SECONDS)).isSameAs(taskOn.get());
        assertThat(steps).containsExactly("task ends", "resumed");
    }

    @Test
    void otherWorkAndASecondResumptionGoToThePool() throws Exception {
        CompletableFuture<Thread> taskOn = new CompletableFuture<>();
        CompletableFuture<Thread> plainOn = new CompletableFuture<>();
        CompletableFuture<Thread> firstOn = new CompletableFuture<>();
        CompletableFuture<Thread> secondOn = new CompletableFuture<>();
        CompletableFuture<Void> release = new CompletableFuture<>();
        pool.execute(() -> ResumingThreadPool.runHere(() -> {
            taskOn.complete(Thread.currentThread());
            pool.execute(() -> plainOn.complete(Thread.currentThread()));
            pool.execute(connection(() -> firstOn.complete(Thread.currentThread())));
            pool.execute(connection(() -> secondOn.complete(Thread.currentThread())));
            release.join();  // the task still runs: what went to the pool runs elsewhere meanwhile
        }));
        Thread task = taskOn.get(10, TimeUnit.SECONDS);
        assertThat(plainOn.get(10, TimeUnit.SECONDS)).isNotSameAs(task);
        assertThat(secondOn.get(10, TimeUnit.SECONDS)).isNotSameAs(task);
        assertThat(firstOn).isNotDone();
        release.complete(null);
        assertThat(firstOn.get(10, TimeUnit.SECONDS)).isSameAs(task);
    }

    @Test
    void aFailingTaskStillResumesItsConnectionAndOutsideAHandOverNothingWaits() throws Exception {
        CompletableFuture<Thread> taskOn = new CompletableFuture<>();
        CompletableFuture<Thread> resumedOn = new CompletableFuture<>();
        pool.execute(() -> ResumingThreadPool.runHere(() -> {
            taskOn.complete(Thread.currentThread());
            pool.execute(connection(() -> resumedOn.complete(Thread.currentThread())));
            throw new IllegalStateException("the handler failed");
        }));
        assertThat(resumedOn.get(10, TimeUnit.SECONDS)).isSameAs(taskOn.get());
        assertThat(ResumingThreadPool.onHandedOverThread()).isFalse();

        CompletableFuture<Thread> direct = new CompletableFuture<>();
        pool.execute(connection(() -> direct.complete(Thread.currentThread())));
        assertThat(direct.get(10, TimeUnit.SECONDS)).isNotSameAs(Thread.currentThread());
    }
}
