package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.InlineCalls;
import org.eclipse.jetty.util.thread.Invocable;
import org.springframework.boot.jetty.JettyWebServer;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Every protocol test again with every request on a request thread
 * ({@code etserve.http.inline-below} and {@code inline-alone-below} both 0): the answers, errors
 * and refusals must not change with the thread that carries them. Beside them, what only these
 * settings do: the server stays a blocking (servlet) one, nothing runs on the selector, Jetty's
 * own pool serves.
 */
class RequestThreadProtocolApiTest extends ProtocolApiTest {

    @DynamicPropertySource
    static void onRequestThreads(DynamicPropertyRegistry r) {
        InlineCalls.offForRest(r);
    }

    @Override
    Invocable.InvocationType expectedInvocationType() {
        return Invocable.InvocationType.BLOCKING;
    }

    @Override
    void assertSelectorServed(long before) {
        assertThat(core.servedOnSelector()).isEqualTo(before);
        assertThat(((JettyWebServer) context.getWebServer()).getServer().getThreadPool())
                .isNotInstanceOf(ResumingThreadPool.class);
    }
}
