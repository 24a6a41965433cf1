package io.etserve.config;

import io.etserve.rest.JsonErrorHandler;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;
import org.eclipse.jetty.http.HttpFields;
import org.eclipse.jetty.http.HttpHeader;
import org.eclipse.jetty.http.HttpMethod;
import org.eclipse.jetty.http.HttpStatus;
import org.eclipse.jetty.server.AbstractConnector;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Handler;
import org.eclipse.jetty.server.HttpConnectionFactory;
import org.eclipse.jetty.server.NetworkConnectionLimit;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.Response;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.util.Callback;
import org.eclipse.jetty.util.thread.QueuedThreadPool;
import org.springframework.boot.jetty.JettyServerCustomizer;

/**
 * What both Jetty servers (the public port and the management port) do alike:
 * <ul>
 *   <li>a request head must arrive within {@code etserve.http.header-timeout}, and at the
 *       connection limit a new connection closes the one that has waited longest for its head
 *       ({@link RequestHeadGuard}): slow headers cannot take the port away; the accept queue
 *       holds {@code etserve.http.accept-queue-size} connections not yet accepted;
 *   <li>Jetty's own error answers (unparseable requests) as {@code {"error": ...}}, not its HTML page;
 *   <li>TRACE answers 405 before any servlet sees it (a servlet would echo the request, headers
 *       included; Tomcat refused it by default, Jetty does not), and a multipart body 415: no
 *       endpoint takes one, and Jetty's servlet layer answered such a request 200 with an empty
 *       body, having done nothing; an Accept list's empty members are left out, as HTTP says;
 *   <li>no reserved threads: they wait for work in a spin-then-park loop that cost up to a third
 *       more CPU per small request at low concurrency here, for a hand-off this service does not need.
 * </ul>
 */
final class JettyServerSettings implements JettyServerCustomizer {

    private final EtServeProperties.Http http;

    JettyServerSettings(EtServeProperties.Http http) {
        this.http = http;
    }

    @Override
    public void customize(Server server) {
        if (server.getDescendant(EarlyRefusals.class) != null) {
            // Applied already: the main context's component scan also finds
            // ManagementServerConfiguration, so the public port's factory gets this twice (and
            // InferHandler may be installed in front of the first EarlyRefusals in between).
            return;
        }
        // Spring Boot adds Jetty's limit (server.jetty.max-connections) before its customizers
        // run; the guard takes its place, letting slow heads go where Jetty would stop accepting.
        NetworkConnectionLimit limit = server.getBean(NetworkConnectionLimit.class);
        if (limit != null) {
            server.removeBean(limit);
        }
        for (Connector connector : server.getConnectors()) {
            if (connector instanceof ServerConnector c) {
                // Connections the kernel completes while Jetty has not accepted them yet: a
                // burst (thousands of clients reconnecting at once) waits there instead of
                // having SYNs dropped, which a client retries only after a second.
                c.setAcceptQueueSize(http.acceptQueueSize());
            }
            // One read per request-buffer's worth: Jetty's default (8 KiB) reads a 4 MiB tensor in
            // 512 reads, each parsed, wrapped and handed over as its own chunk; the buffer is
            // taken only while a thread parses what was read and given back when a read finds
            // nothing, so idle and slow connections hold none
            // (bench/results/2026-12-04-2core-serving-cost.md).
            HttpConnectionFactory h1 = connector.getConnectionFactory(HttpConnectionFactory.class);
            if (h1 != null) {
                h1.setInputBufferSize((int) http.inputBufferSize().toBytes());
            }
            if (connector instanceof AbstractConnector c) {
                RequestHeadGuard guard = new RequestHeadGuard(c, http.headerTimeout(),
                        limit == null ? 0 : limit.getMaxNetworkConnectionCount());
                c.addBean(guard);
                c.addEventListener(guard);
            }
        }
        server.setErrorHandler(new JsonErrorHandler());
        server.setHandler(new EarlyRefusals(server.getHandler()));
        if (server.getThreadPool() instanceof QueuedThreadPool pool) {
            pool.setReservedThreads(0);
        }
    }

    /** Requests no endpoint serves, answered before the servlet layer sees them. */
    private static final class EarlyRefusals extends Handler.Wrapper {
        EarlyRefusals(Handler handler) {
            super(handler);
        }

        @Override
        public boolean handle(Request request, Response response, Callback callback) throws Exception {
            if (HttpMethod.TRACE.is(request.getMethod())) {
                Response.writeError(request, response, callback, HttpStatus.METHOD_NOT_ALLOWED_405);
                return true;
            }
            String type = request.getHeaders().get(HttpHeader.CONTENT_TYPE);
            if (type != null && type.regionMatches(true, 0, "multipart/", 0, "multipart/".length())) {
                JsonErrorHandler.write(response, callback, HttpStatus.UNSUPPORTED_MEDIA_TYPE_415,
                        "multipart bodies are not accepted; send application/json or application/octet-stream");
                return true;
            }
            return super.handle(acceptWithoutEmptyMembers(request), response, callback);
        }

        /**
         * The request with its Accept list's empty members left out, as HTTP says a recipient
         * must (RFC 9110, 5.6.1): Spring's actuator endpoints failed 500 on {@code Accept: ,}.
         */
        static Request acceptWithoutEmptyMembers(Request request) {
            List<String> values = request.getHeaders().getValuesList(HttpHeader.ACCEPT);
            if (values.isEmpty() || values.stream().noneMatch(EarlyRefusals::hasEmptyMember)) {
                return request;
            }
            String members = values.stream().flatMap(v -> Arrays.stream(v.split(",")))
                    .map(String::strip).filter(m -> !m.isEmpty()).collect(Collectors.joining(", "));
            HttpFields.Mutable headers = HttpFields.build(request.getHeaders()).remove(HttpHeader.ACCEPT);
            if (!members.isEmpty()) {
                headers.put(HttpHeader.ACCEPT, members);
            }
            HttpFields cleaned = headers.asImmutable();
            return new Request.Wrapper(request) {
                @Override
                public HttpFields getHeaders() {
                    return cleaned;
                }
            };
        }

        private static boolean hasEmptyMember(String list) {
            return Arrays.stream(list.split(",", -1)).anyMatch(String::isBlank);
        }
    }
}
