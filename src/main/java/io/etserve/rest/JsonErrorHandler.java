package io.etserve.rest;

import io.etserve.protocol.ErrorBody;
import java.nio.ByteBuffer;
import java.util.Map;
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
 * clients of an API server parse JSON, and the page named the server's version. Errors inside
 * the servlet context still go through Spring's error dispatch.
 */
public final class JsonErrorHandler extends ErrorHandler {

    private static final HttpField JSON = new HttpField(HttpHeader.CONTENT_TYPE, MimeTypes.Type.APPLICATION_JSON_UTF_8.asString());

    /** Every refusal gets its body (Jetty writes one only for GET, POST and HEAD). */
    @Override
    public boolean errorPageForMethod(String method) {
        return true;
    }

    private static final String CHARACTER = "the path holds a character no model's name may hold (such as '\\' or"
            + " a control character)";
    private static final String NOT_UTF8 = "the path's escapes (%XX) are not UTF-8: escape a name's UTF-8 bytes";
    private static final String ESCAPE = "the path has a '%' that is not followed by two hexadecimal digits";

    /**
     * Jetty's words for refusals whose reason the client needs, each with what the service says
     * instead. Jetty's messages stay out otherwise (they may quote the request); these are fixed
     * strings that quote nothing: a TLS request whose host the certificate does not hold
     * (SecureRequestCustomizer); the path checks of Jetty's URI compliance (UriCompliance's
     * violations, several joined by ", "), which refuse a hostile or mistaken model name before
     * any handler of the service sees it; and the words of the exceptions under a path Jetty
     * could not decode.
     */
    static final Map<String, String> EXPLAINED = Map.ofEntries(
            Map.entry("Invalid SNI", "the request's host is not a name the server's TLS certificate holds (a request"
                    + " by IP address, or by another name): connect by a name in the certificate"),
            Map.entry("Ambiguous URI path separator", "the path has an escaped '/' (%2F) inside a segment: a model's"
                    + " name or version cannot hold '/'"),
            Map.entry("Ambiguous URI path segment", "the path has an escaped '.' or '..' segment (%2E): a model's name"
                    + " cannot be '.' or '..'"),
            Map.entry("Ambiguous URI empty segment", "the path has an empty segment ('//'): a model's name or version"
                    + " is missing"),
            Map.entry("Ambiguous URI path parameter", "the path has a parameter (';'): the protocol's paths have none"),
            Map.entry("Ambiguous URI path encoding", "the path has an escaped '%' (%25): a model's name cannot hold one"),
            Map.entry("Bad UTF-8 encoding", NOT_UTF8),
            Map.entry("Truncated UTF-8 encoding", NOT_UTF8),
            Map.entry("UTF-16 encoding", "the path has a UTF-16 escape (%uXXXX): escape a name's UTF-8 bytes as %XX"),
            Map.entry("Bad percent encoding", ESCAPE),
            Map.entry("Suspicious Path Character", CHARACTER),
            Map.entry("Illegal Path Character", CHARACTER),
            Map.entry("Illegal character in path", CHARACTER));

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
     * servlets (this handler's own pages say the reason phrase, or why Jetty refused the path).
     */
    public static void write(Response response, Callback callback, int code, String message) {
        response.setStatus(code);
        response.getHeaders().put(JSON);
        response.write(true, ByteBuffer.wrap(ErrorBody.error(message)), callback);
    }

    private static byte[] body(int code, String jettysMessage, Throwable cause) {
        String explained = code == 400 ? explain(jettysMessage, cause) : null;
        return ErrorBody.error(explained != null ? explained : ApiException.reasonPhrase(code));
    }

    /** What the service says for Jetty's {@code message} or its {@code cause}, or null: nothing it knows. */
    static String explain(String message, Throwable cause) {
        if (message != null) {
            for (String words : message.split(", ")) {
                String explained = EXPLAINED.get(words);
                if (explained != null) {
                    return explained;
                }
            }
        }
        for (int depth = 0; cause != null && depth < 8; cause = cause.getCause(), depth++) {
            String words = cause.getMessage();
            if (words != null && words.startsWith("!hex")) {
                return ESCAPE; // a percent escape's digit that is not hexadecimal (Jetty's TypeUtil)
            }
            if (words != null && EXPLAINED.containsKey(words)) {
                return EXPLAINED.get(words);
            }
        }
        return null;
    }
}
