package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.util.thread.Invocable;
import org.springframework.boot.jetty.JettyWebServer;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Every protocol test again with quick calls on a busy selector ({@code etserve.http.inline-below}):
 * the answers, errors and refusals must not change with the thread that carries them. Beside
 * them, what only this setting does: the server declares itself non-blocking, quick calls of
 * several connections run on the selector, a selector per core, the resuming pool.
 */
class InlineProtocolApiTest extends ProtocolApiTest {

    @DynamicPropertySource
    static void inline(DynamicPropertyRegistry r) {
        r.add("etserve.http.inline-below", () -> "250us");
    }

    @Override
    Invocable.InvocationType expectedInvocationType() {
        return Invocable.InvocationType.NON_BLOCKING;
    }

    @Override
    void assertSelectorServed(long before) {
        assertThat(core.servedOnSelector()).isGreaterThan(before);
        Server server = ((JettyWebServer) context.getWebServer()).getServer();
        assertThat(server.getThreadPool()).isInstanceOf(ResumingThreadPool.class);
        assertThat(((ServerConnector) server.getConnectors()[0]).getSelectorManager().getSelectorCount())
                .isEqualTo(Runtime.getRuntime().availableProcessors());
    }
}
