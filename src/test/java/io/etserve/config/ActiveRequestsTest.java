package io.etserve.config;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.eclipse.jetty.server.Handler;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.Response;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.util.Callback;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.boot.jetty.JettyWebServer;
import org.springframework.boot.web.server.GracefulShutdownResult;

/** The count graceful shutdown waits on, on a real Jetty server, read by Spring Boot's own graceful shutdown. */
class ActiveRequestsTest {

    private final CountDownLatch held = new CountDownLatch(1);
    private final CountDownLatch release = new CountDownLatch(1);
    private final HttpClient client = HttpClient.newHttpClient();
    private JettyWebServer web;

    /** Answers /slow once released, declines /declined (404), throws on /throws (500), else answers at once. */
    private final Handler app = new Handler.Abstract() {
        @Override
        public boolean handle(Request request, Response response, Callback callback) throws Exception {
            String path = request.getHttpURI().getPath();
            switch (path) {
                case "/declined" -> {
                    return false;
                }
                case "/throws" -> throw new IllegalStateException("thrown by the handler");
                case "/slow" -> new Thread(() -> {
                    held.countDown();
                    try {
                        release.await();
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                    response.setStatus(200);
                    response.write(true, null, callback);
                }).start();
                default -> {
                    response.setStatus(200);
                    response.write(true, null, callback);
                }
            }
            return true;
        }
    };

    private ActiveRequests start() throws Exception {
        Server server = new Server();
        ServerConnector connector = new ServerConnector(server);
        connector.setHost("127.0.0.1");
        connector.setPort(0);
        server.addConnector(connector);
        server.setHandler(app);
        ActiveRequests.install(server);
        ActiveRequests.install(server);  // once only
        web = new JettyWebServer(server);
        web.start();
        assertThat(server.getDescendants(ActiveRequests.class)).hasSize(1);
        return (ActiveRequests) server.getHandler();
    }

    @AfterEach
    void stop() {
        release.countDown();
        if (web != null) {
            web.stop();
        }
    }

    private CompletableFuture<HttpResponse<String>> get(String path) {
        return client.sendAsync(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + web.getPort() + path))
                .timeout(Duration.ofSeconds(10)).build(), HttpResponse.BodyHandlers.ofString());
    }

    @Test
    void countsARequestUntilItsAnswerIsDoneHoweverItEnds() throws Exception {
        ActiveRequests active = start();
        assertThat(get("/quick").get(10, TimeUnit.SECONDS).statusCode()).isEqualTo(200);
        assertThat(get("/declined").get(10, TimeUnit.SECONDS).statusCode()).isEqualTo(404);
        assertThat(get("/throws").get(10, TimeUnit.SECONDS).statusCode()).isEqualTo(500);
        awaitZero(active);

        CompletableFuture<HttpResponse<String>> slow = get("/slow");
        assertThat(held.await(10, TimeUnit.SECONDS)).isTrue();
        assertThat(active.getRequestsActive()).isEqualTo(1);
        release.countDown();
        assertThat(slow.get(10, TimeUnit.SECONDS).statusCode()).isEqualTo(200);
        // The count drops once the callback has returned, which may be just after the client has its answer.
        awaitZero(active);
    }

    private static void awaitZero(ActiveRequests active) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (active.getRequestsActive() != 0 && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
        assertThat(active.getRequestsActive()).isZero();
    }

    @Test
    void springBootsGracefulShutdownWaitsForTheRequestsItCounts() throws Exception {
        start();
        CompletableFuture<HttpResponse<String>> slow = get("/slow");
        assertThat(held.await(10, TimeUnit.SECONDS)).isTrue();
        CompletableFuture<GracefulShutdownResult> result = new CompletableFuture<>();
        web.shutDownGracefully(result::complete);
        Thread.sleep(400);  // Spring Boot looks every 100 ms
        assertThat(result).isNotDone();
        release.countDown();
        assertThat(result.get(10, TimeUnit.SECONDS)).isEqualTo(GracefulShutdownResult.IDLE);
        assertThat(slow.get(10, TimeUnit.SECONDS).statusCode()).isEqualTo(200);
    }
}
