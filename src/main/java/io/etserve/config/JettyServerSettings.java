package io.etserve.config;

import io.etserve.api.JsonErrorHandler;
import org.eclipse.jetty.http.HttpMethod;
import org.eclipse.jetty.http.HttpStatus;
import org.eclipse.jetty.server.Handler;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.Response;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.util.Callback;
import org.eclipse.jetty.util.thread.QueuedThreadPool;
import org.springframework.boot.jetty.JettyServerCustomizer;

/**
 * What both Jetty servers (the public port and the management port) do alike:
 * <ul>
 *   <li>Jetty's own error answers (unparseable requests) as {@code {"error": ...}}, not its HTML page;
 *   <li>TRACE answers 405 before any servlet sees it (a servlet would echo the request, headers
 *       included; Tomcat refused it by default, Jetty does not);
 *   <li>no reserved threads: they wait for work in a spin-then-park loop that cost up to a third
 *       more CPU per small request at low concurrency here, for a hand-off this service does not need.
 * </ul>
 */
final class JettyServerSettings implements JettyServerCustomizer {

    @Override
    public void customize(Server server) {
        server.setErrorHandler(new JsonErrorHandler());
        server.setHandler(new TraceRefusal(server.getHandler()));
        if (server.getThreadPool() instanceof QueuedThreadPool pool) {
            pool.setReservedThreads(0);
        }
    }

    private static final class TraceRefusal extends Handler.Wrapper {
        TraceRefusal(Handler handler) {
            super(handler);
        }

        @Override
        public boolean handle(Request request, Response response, Callback callback) throws Exception {
            if (HttpMethod.TRACE.is(request.getMethod())) {
                Response.writeError(request, response, callback, HttpStatus.METHOD_NOT_ALLOWED_405);
                return true;
            }
            return super.handle(request, response, callback);
        }
    }
}
