package io.etserve.rest;

import java.util.Map;

/**
 * What the service says for a request Jetty refuses before any handler of the service runs: its
 * parser's refusals of a malformed request head, its URI compliance checks of the path (where a
 * hostile or mistaken model name usually is) and the TLS host check. Jetty's own messages are
 * only looked up here, never sent: most are fixed words, but some would quote the request.
 */
final class JettyRefusals {

    private static final String CHARACTER = "the path holds a character no model's name may hold (such as '\\' or"
            + " a control character)";
    private static final String NOT_UTF8 = "the path's escapes (%XX) are not UTF-8: escape a name's UTF-8 bytes";
    private static final String ESCAPE = "the path has a '%' that is not followed by two hexadecimal digits";

    /** Jetty's words (fixed strings that quote nothing), each with the service's. */
    private static final Map<String, String> EXPLAINED = Map.ofEntries(
            // SecureRequestCustomizer: the host is not one the certificate holds.
            Map.entry("Invalid SNI", "the request's host is not a name the server's TLS certificate holds (a request"
                    + " by IP address, or by another name): connect by a name in the certificate"),
            // UriCompliance's violations (several are joined by ", ").
            Map.entry("Ambiguous URI path separator", "the path has an escaped '/' (%2F) inside a segment: a model's"
                    + " name or version cannot hold '/'"),
            Map.entry("Ambiguous URI path segment", "the path has an escaped '.' or '..' segment (%2E): a model's name"
                    + " cannot be '.' or '..'"),
            Map.entry("Ambiguous URI empty segment", "the path has an empty segment ('//'): a model's name or version"
                    + " is missing"),
            Map.entry("Ambiguous URI path parameter", "the path has a parameter (';'): the protocol's paths have none"),
            Map.entry("Ambiguous URI path encoding", "the path has an escaped '%' (%25): a model's name cannot hold"
                    + " one"),
            Map.entry("Bad UTF-8 encoding", NOT_UTF8),
            Map.entry("Truncated UTF-8 encoding", NOT_UTF8),
            Map.entry("UTF-16 encoding", "the path has a UTF-16 escape (%uXXXX): escape a name's UTF-8 bytes as %XX"),
            Map.entry("Bad percent encoding", ESCAPE),
            Map.entry("Suspicious Path Character", CHARACTER),
            Map.entry("Illegal Path Character", CHARACTER),
            Map.entry("Illegal character in path", CHARACTER),
            Map.entry("Deprecated User Info", "the request's target holds user information (user@host), which HTTP"
                    + " no longer allows"),
            Map.entry("Fragment", "the request's target has a fragment ('#...'), which a client does not send"),
            // HttpParser and the request's own checks of its head.
            Map.entry("Multiple Content-Lengths", "the request has more than one Content-Length header"),
            Map.entry("Invalid Content-Length Value", "the request's Content-Length is not a number of bytes"),
            Map.entry("Transfer-Encoding and Content-Length", "the request has both Transfer-Encoding and"
                    + " Content-Length: send one"),
            Map.entry("Bad Transfer-Encoding, chunked not last", "the request's Transfer-Encoding must end with"
                    + " 'chunked' (compress a body with Content-Encoding instead)"),
            Map.entry("No Host", "an HTTP/1.1 request needs a Host header"),
            Map.entry("Duplicate Host Header", "the request has more than one Host header"),
            Map.entry("Authority!=Host", "the request's target names a host other than its Host header"),
            Map.entry("Line Folding not supported", "a header goes on over the next line (obsolete line folding):"
                    + " write each header on one line"),
            Map.entry("Bad EOL", "the request's lines must end with CRLF"));

    private JettyRefusals() {}

    /**
     * The service's words for Jetty's 400 with {@code message} (and the exceptions under it, for a
     * path Jetty could not decode), or null where it knows none.
     */
    static String explain(int code, String message, Throwable cause) {
        if (code != 400) {
            return null; // the other refusals' reason phrases say it: URI Too Long, Expectation Failed...
        }
        if (message != null) {
            String whole = EXPLAINED.get(message);
            if (whole != null) {
                return whole;
            }
            for (String words : message.split(", ")) {
                String explained = EXPLAINED.get(words);
                if (explained != null) {
                    return explained;
                }
            }
            if (message.startsWith("Illegal character ")) {
                return "the request's line or headers hold a character HTTP does not allow there (a control"
                        + " character, or a space where none may be)";
            }
        }
        for (int depth = 0; cause != null && depth < 8; cause = cause.getCause(), depth++) {
            String words = cause.getMessage();
            if (words != null && words.startsWith("!hex")) {
                return ESCAPE; // a percent escape's digit that is not hexadecimal (Jetty's TypeUtil)
            }
            String explained = words == null ? null : EXPLAINED.get(words);
            if (explained != null) {
                return explained;
            }
        }
        return null;
    }
}
