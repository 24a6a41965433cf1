package io.etserve.api;

import java.io.IOException;
import java.io.Writer;
import org.apache.catalina.connector.Request;
import org.apache.catalina.connector.Response;
import org.apache.catalina.valves.ErrorReportValve;
import org.springframework.http.HttpStatus;

/**
 * Tomcat's own error answers (a request it could not parse: bad URL encoding, oversized or too
 * many headers) as {@code {"error": ...}} instead of its HTML page: clients of an API server
 * parse JSON, and the page named the server's version.
 */
public final class JsonErrorReportValve extends ErrorReportValve {

    @Override
    protected void report(Request request, Response response, Throwable throwable) {
        int code = response.getStatus();
        if (code < 400 || response.getContentWritten() > 0 || !response.setErrorReported()) {
            return;
        }
        HttpStatus status = HttpStatus.resolve(code);
        String message = status != null ? status.getReasonPhrase() : "HTTP " + code;
        try {
            response.setContentType("application/json");
            response.setCharacterEncoding("UTF-8");
            Writer writer = response.getReporter();
            if (writer != null) {
                writer.write(new String(ErrorResponses.json(message), java.nio.charset.StandardCharsets.UTF_8));
                response.finishResponse();
            }
        } catch (IOException | IllegalStateException e) {
            // The connection is gone or the response was committed meanwhile: nothing to add.
        }
    }
}
