package io.etserve.rest;

import io.etserve.protocol.ErrorBody;
import java.nio.ByteBuffer;
import org.eclipse.jetty.http.HttpField;
import org.eclipse.jetty.http.HttpFields;
import org.eclipse.jetty.http.HttpHeader;
import org.eclipse.jetty.http.MimeTypes;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.Response;
import org.eclipse.jetty.server.handler.ErrorHandler;
import org.eclipse.jetty.util.Callback;

/**
 * Jetty's own error answers (a request it could not parse: bad URL encoding, oversized or too
 * many headers, a broken chunked body) as {@code {"error": ...}} instead of its HTML page:
 * clients of an API server parse JSON, and the page named the server's version. The message says
 * what is wrong where {@link JettyRefusals} knows Jetty's reason, the status's words otherwise.
 * Errors inside the servlet context still go through Spring's error dispatch.
 */
public final class JsonErrorHandler extends ErrorHandler {

    private static final HttpField JSON = new HttpField(HttpHeader.CONTENT_TYPE, MimeTypes.Type.APPLICATION_JSON_UTF_8.asString());

    /** Every refusal gets its body (Jetty writes one only for GET, POST and HEAD). */
    @Override
    public boolean errorPageForMethod(String method) {
        return true;
    }

    @Override
    protected void generateResponse(Request request, Response response, int code, String message, Throwable cause,
            Callback callback) {
        response.getHeaders().put(JSON);
        response.write(true, ByteBuffer.wrap(body(code, message, cause)), callback);
    }

    /** Requests refused while parsing, before any handler runs. */
    @Override
    public ByteBuffer badMessageError(int code, String message, HttpFields.Mutable fields) {
        fields.put(JSON);
        return ByteBuffer.wrap(body(code, message, null));
    }

    /**
     * A refusal with a message of the service's own, written by a Jetty handler in front of the
     * servlets (this handler's own pages say only what Jetty's reason tells).
     */
    public static void write(Response response, Callback callback, int code, String message) {
        response.setStatus(code);
        response.getHeaders().put(JSON);
        response.write(true, ByteBuffer.wrap(ErrorBody.error(message)), callback);
    }

    private static byte[] body(int code, String jettysMessage, Throwable cause) {
        String explained = JettyRefusals.explain(code, jettysMessage, cause);
        return ErrorBody.error(explained != null ? explained : ApiException.reasonPhrase(code));
    }
}
